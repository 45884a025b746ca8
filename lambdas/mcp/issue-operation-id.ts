import * as z from 'zod';
import { ErrorCode, SecretUnavailableError } from '../core/errors';
import { TOOL_NAME_PATTERN } from '../core/idempotency-key';
import { defineReadTool, ReadToolError } from './define-read-tool';
import { isWriteTool } from './tool-types';

/**
 * Mints the operation ids of the server's tools with `keySource: 'operation_id'` (`ctx.tools`): the endpoint adds it
 * to every tools module with such a tool; on your own McpServer, `registerReadTool` with `tools` puts it there.
 * @public
 */
export const issueOperationIdTool = defineReadTool({
  name: 'issue_operation_id',
  title: 'Issue operation id',
  description:
    'Returns a new operation_id for a tool that requires one (high-risk tools such as payments). Call it once per ' +
    'intended operation and reuse the id on every retry of that operation; it is bound to your account and that tool, ' +
    'and expires (see expires_at) if unused.',
  input: { tool: z.string().regex(TOOL_NAME_PATTERN).describe('The tool you will call with the id.') },
  result: z.object({ operation_id: z.string(), tool: z.string(), expires_at: z.string().describe('ISO 8601.') }),
  // Mints a signed id and stores nothing: calling it has no effect on any state.
  annotations: { openWorldHint: false },
  async execute({ tool }, { services, caller, tools }) {
    const definition = tools.get(tool);
    if (!definition || !isWriteTool(definition) || definition.keySource !== 'operation_id') {
      const takers = [...tools.values()].filter((t) => isWriteTool(t) && t.keySource === 'operation_id').map((t) => t.name);
      throw new ReadToolError(
        ErrorCode.INVALID_ARGUMENTS,
        `tool must be a tool that takes an operation_id (${takers.join(', ') || 'none on this server'}); other write tools take a client-generated idempotency_key.`,
      );
    }
    const issued = await services.operationIds.issue({ tenant: caller.tenant, tool }).catch((err: unknown) => {
      if (!(err instanceof SecretUnavailableError)) throw err;
      services.logger.warn('operation id not issued: the key is unavailable', { reason: err.message });
      throw new ReadToolError(err.code, 'An operation_id cannot be issued right now; nothing was issued. Try again shortly.');
    });
    return { operation_id: issued.operationId, tool, expires_at: new Date(issued.expiresAt * 1000).toISOString() };
  },
});
