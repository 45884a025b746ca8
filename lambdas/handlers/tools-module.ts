import type { ToolDefinition } from '../mcp/tool-types';
import type { WorkerServices } from '../runtime/worker-services';

/**
 * A team's tools module: `export const tools = [...]` (or a default export of the list), and optionally
 * `export function withClients(services) { return { ...services, invoices: new InvoicesClient() } }`, which adds
 * the clients its tools and their reconcile hooks call. Both the MCP function and the reconciler call it, once per
 * container, so a hook gets the same client as the tool.
 */
export interface ToolsModule {
  tools?: unknown;
  default?: unknown;
  withClients?: unknown;
}

/** The tool list of a tools module, or an error naming what is missing (it fails the cold start, not a request). */
export function toolsOf(module: ToolsModule): readonly ToolDefinition[] {
  const tools = module.tools ?? module.default;
  const valid = Array.isArray(tools) && tools.every((t) => typeof t?.name === 'string' && typeof t?.call === 'function');
  if (!valid) throw new TypeError('the tools module must export `tools`: an array of defineWriteTool / defineReadTool results');
  return tools as readonly ToolDefinition[];
}

/**
 * The module's `withClients`, or `fallback` when it exports none; anything else than a function fails the cold
 * start with the reason.
 */
export function clientsOf<S extends WorkerServices>(module: ToolsModule, fallback: (services: S) => S): (services: S) => S {
  if (module.withClients === undefined) return fallback;
  if (typeof module.withClients !== 'function') {
    throw new TypeError('the tools module exports `withClients`, but not as a function: export function withClients(services) { return { ...services, yourClient } }');
  }
  return module.withClients as (services: S) => S;
}
