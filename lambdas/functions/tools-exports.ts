import type { ToolDefinition } from '../mcp/tool-types';
import type { WorkerServices } from '../runtime/worker-services';

/**
 * A tools module as loaded (the namespace object of the team's tools file), before it is checked: what a team writes is
 * typed by `ToolsModule` (idempotent-mcp/mcp); `toolsOf` and `clientsOf` check what the bundle actually exports,
 * which may also be a default export of the tool list.
 */
export interface ToolsModuleExports {
  tools?: unknown;
  default?: unknown;
  withClients?: unknown;
}

/**
 * The tool list of a tools module, or an error naming what is missing (it fails the cold start, not a request).
 * The constructs run the same check on your tools module at synth.
 */
export function toolsOf(module: ToolsModuleExports): readonly ToolDefinition[] {
  const tools = module.tools ?? module.default;
  const valid = Array.isArray(tools) && tools.every((t) => typeof t?.name === 'string' && typeof t?.call === 'function');
  if (!valid) throw new TypeError('the tools module must export `tools`: an array of defineWriteTool / defineReadTool results');
  return tools as readonly ToolDefinition[];
}

/**
 * The module's `withClients`, or `fallback` when it exports none; anything else than a function fails the cold
 * start with the reason.
 */
export function clientsOf<S extends WorkerServices>(module: ToolsModuleExports, fallback: (services: S) => S): (services: S) => S {
  if (module.withClients === undefined) return fallback;
  if (typeof module.withClients !== 'function') {
    throw new TypeError(
      'the tools module exports `withClients`, but not as a function: export function withClients(services) { return { ...services, yourClient } }',
    );
  }
  return module.withClients as (services: S) => S;
}
