import type { ToolDefinition } from '../mcp/tool-types';
import type { ToolsModule } from '../mcp/tools-module';
import type { WorkerServices } from '../runtime/worker-services';

/**
 * A tools module as loaded (the namespace object of the team's tools file), before it is checked: what a team writes is
 * typed by `ToolsModule` (idempotent-mcp/mcp), the handlers' parameter; `toolsOf` and `clientsOf` check what the
 * bundle actually exports (esbuild bundles without a type check), which may also be a default export of the tool list.
 */
export type ToolsModuleExports = { readonly [K in keyof ToolsModule | 'default']?: unknown };

/**
 * Refuses the handler's second argument at cold start: `withClients` was once one, and a handler file still written
 * so (esbuild bundles it without a type check) would serve its tools without their clients, each call "uncertain".
 */
export function oneArgument(handler: string, count: number): void {
  if (count > 1) {
    throw new TypeError(`${handler} takes one argument, the tools module; put withClients in it: ${handler}({ tools, withClients })`);
  }
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
