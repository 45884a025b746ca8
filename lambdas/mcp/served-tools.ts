import { getOperationStatusTool } from './get-operation-status';
import { issueOperationIdTool } from './issue-operation-id';
import { isWriteTool, type ToolDefinition, type ToolRuntime } from './tool-types';

/** The toolkit's own tools and when a server needs them. */
const TOOLKIT_TOOLS: readonly { tool: ToolDefinition; neededBy: (tool: ToolDefinition) => boolean }[] = [
  { tool: getOperationStatusTool, neededBy: isWriteTool },
  { tool: issueOperationIdTool, neededBy: (tool) => isWriteTool(tool) && tool.keySource === 'operation_id' },
];

const served = new WeakMap<readonly ToolDefinition[], readonly ToolDefinition[]>();

/**
 * What a server with these tools serves: them, plus the toolkit's tools they need (`get_operation_status` with any
 * write tool, `issue_operation_id` with a tool that takes an operation id), which answer for these tools. Throws,
 * naming it, when two tools share a name (a tool of your own named like one of the toolkit's among them).
 */
export function servedTools<S extends ToolRuntime>(tools: readonly ToolDefinition<S>[]): readonly ToolDefinition<S>[] {
  let list = served.get(tools as readonly ToolDefinition[]);
  if (!list) {
    const added = TOOLKIT_TOOLS.filter(({ tool, neededBy }) => !tools.includes(tool) && tools.some(neededBy)).map(({ tool }) => tool);
    list = [...tools, ...added] as readonly ToolDefinition[];
    const names = new Set<string>();
    for (const tool of list) {
      if (names.has(tool.name)) {
        const toolkit = TOOLKIT_TOOLS.some(({ tool: own }) => own.name === tool.name);
        throw new TypeError(
          toolkit
            ? `${tool.name} is the toolkit's own tool, served for you with your write tools: remove yours from the tools`
            : `two tools are named ${tool.name}: a tool name is unique on a server`,
        );
      }
      names.add(tool.name);
    }
    served.set(tools as readonly ToolDefinition[], list);
  }
  return list as readonly ToolDefinition<S>[];
}

/**
 * The server's instructions, written from the tools it serves: how to key and retry its write tools, and the
 * toolkit's tools that are there to help. Undefined for a server without write tools (nothing to say).
 * @public
 */
export function serverInstructions(tools: readonly ToolDefinition[]): string | undefined {
  const writes = tools.filter(isWriteTool);
  if (writes.length === 0) return undefined;
  const names = new Set(tools.map((tool) => tool.name));
  const byOperationId = writes.filter((tool) => tool.keySource === 'operation_id').map((tool) => tool.name);
  const keys =
    byOperationId.length === 0
      ? 'idempotency_key'
      : byOperationId.length === writes.length
        ? 'operation_id'
        : 'idempotency_key (or operation_id)';
  const lines = [
    `Write tools never run twice for the same ${keys}: ` +
      (byOperationId.length === writes.length ? 'get one once per intended operation' : 'generate a key once per intended operation') +
      ' and reuse it on every retry. Every write result has an `outcome`; retry only when `retryable` is true, with the same key, after `retry_after_ms`.',
  ];
  if (byOperationId.length > 0 && names.has(issueOperationIdTool.name))
    lines.push(
      `${byOperationId.join(', ')} take an operation_id from issue_operation_id { "tool": <its name> }, one per intended operation.`,
    );
  if (names.has(getOperationStatusTool.name)) lines.push('Use get_operation_status to ask what became of an earlier call.');
  return lines.join(' ');
}
