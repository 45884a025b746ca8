import type { Services, ToolRuntime } from 'idempotent-mcp/mcp';

/**
 * What the reference endpoint's tools reach besides the tool runtime, each type naming only what its tools use:
 * the tools are typed against these, not against the endpoint's whole services object.
 */
export type OrderServices = ToolRuntime & Pick<Services, 'doc' | 'tableName'>;
export type PaymentServices = ToolRuntime & { downstreams: Pick<Services['downstreams'], 'payments'> };
