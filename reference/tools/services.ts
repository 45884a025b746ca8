import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { ToolRuntime } from 'idempotent-mcp/mcp';
import { loadReferenceConfig } from '../config';
import { createPaymentsClient } from '../downstream';
import type { PaymentsClient } from '../downstream/payments';

/** The reference endpoint's own clients next to the toolkit's services: the payments provider of request_payment. */
export interface ReferenceClients {
  downstreams: { payments: PaymentsClient };
}

/**
 * What the reference endpoint's tools reach besides the tool runtime, each type naming only what its tools use:
 * the tools are typed against these, not against the endpoint's whole services object.
 */
export type OrderServices = ToolRuntime & { doc: DynamoDBDocumentClient; tableName: string };
export type PaymentServices = ToolRuntime & ReferenceClients;

/**
 * The reference endpoint's services: the toolkit's (the MCP function's, or the reconciler's for the reconcile
 * hooks) with its own clients added. The toolkit builds no downstream client of its own.
 */
export function withReferenceClients<S>(services: S, config = loadReferenceConfig()): S & ReferenceClients {
  return { ...services, downstreams: { payments: createPaymentsClient(config) } };
}
