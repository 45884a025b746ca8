import type { ToolDefinition } from '../mcp/tool-types';

/** A team's tools module: `export const tools = [...]` (or a default export of the list). */
export interface ToolsModule {
  tools?: unknown;
  default?: unknown;
}

/** The tool list of a tools module, or an error naming what is missing (it fails the cold start, not a request). */
export function toolsOf(module: ToolsModule): readonly ToolDefinition[] {
  const tools = module.tools ?? module.default;
  const valid = Array.isArray(tools) && tools.every((t) => typeof t?.name === 'string' && typeof t?.call === 'function');
  if (!valid) throw new TypeError('the tools module must export `tools`: an array of defineWriteTool / defineReadTool results');
  return tools as readonly ToolDefinition[];
}
