import type { DeliveryHandler } from '../outbox/consumer';
import type { OutboxRuntime } from './outbox-tool';
import type { ToolDefinition, ToolRuntime } from './tool-types';

/**
 * What a tools module exports: the module `IdempotentMcpEndpoint` bundles (its `tools` prop), or the object your own
 * server hands to `registerWriteTool` and `startReconciler`. `S` is the services your tools are typed against (the
 * tool runtime and your clients).
 * @public
 */
export interface ToolsModule<S extends ToolRuntime = ToolRuntime> {
  /** The tools the endpoint serves, from `defineWriteTool` and `defineReadTool`. */
  readonly tools: readonly ToolDefinition<S>[];
  /**
   * Adds the clients your tools call (what `S` holds besides what the endpoint's services hold: for
   * `ToolRuntime & { invoices: InvoiceBook }`, `{ invoices }`) to services the toolkit built, keeping everything else
   * they hold. The endpoint's services hold the tool runtime (`ToolRuntime`), the outbox and new event ids
   * (`OutboxRuntime`'s `outbox` and `newEventId`) and its table (`doc`, its DynamoDB document client, and `tableName`),
   * so `S` may build on any of those without `withClients` adding them. Called once per process (per Lambda
   * container) by the MCP function and by the reconciler, so a tool's reconcile hook asks its downstream through the
   * same client as the tool; your own server calls it with its tool runtime (and adds whatever else of those its `S`
   * uses). So it is generic over what it is given:
   * `function withClients<B extends object>(services: B) { return { ...services, invoices: new InvoiceBook() }; }`.
   * Without it the tools get the toolkit's services alone.
   */
  readonly withClients?: <B extends object>(services: B) => B & Omit<S, keyof OutboxRuntime | 'doc' | 'tableName'>;
  /**
   * How the outbox consumer performs the event types your tools commit with `queueEffect`, by type. The endpoint reads
   * it from the file of its `deliveries` prop (which may be this same module).
   */
  readonly deliveries?: Readonly<Record<string, DeliveryHandler>>;
}
