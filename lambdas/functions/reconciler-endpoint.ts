import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import { createReconcilerHandler } from '../runtime/worker-events';
import { createWorkerServices, type WorkerServices } from '../runtime/worker-services';
import type { ToolRuntime } from '../mcp/tool-types';
import type { ToolsModule } from '../mcp/tools-module';
import { createReconciler, type ReconcilerServices } from '../runtime/workers';
import { clientsOf, oneArgument, toolsOf } from './tools-exports';

/**
 * The reconciler of an endpoint serving these tools: their reconcile hooks settle lost outcomes. Each hook gets the
 * workers' services, with the clients the tools module's `withClients` adds (the reference endpoint's payments
 * provider), as in the MCP function; no engine, signers or token verifier are built. `module` as `mcpLambdaHandler`
 * takes it, its one argument. A module of its own, apart from the MCP function's factory (./endpoint.ts):
 * importing that one would bundle the MCP SDK here, whose modules run code at load and so survive tree-shaking
 * even when nothing calls them.
 * @public
 */
export function reconcilerLambdaHandler<S extends ToolRuntime>(module: ToolsModule<S>) {
  // biome-ignore lint/complexity/noArguments: the count of what a caller passed, an untyped bundle's included.
  oneArgument('reconcilerLambdaHandler', arguments.length);
  const withClients: (services: WorkerServices) => ReconcilerServices = clientsOf<WorkerServices>(module, (services) => services);
  const services = withClients(createWorkerServices(loadWorkerConfig()));
  return withMetrics(createReconcilerHandler(createReconciler(services, { tools: toolsOf(module) }), services.logger));
}
