import type { CallToolResult } from '@modelcontextprotocol/server';
import * as z from 'zod';
import { ErrorCode } from '../core/errors';
import { readErrorText } from '../core/result-contract';
import type { Caller } from '../auth/verifier';
import { parseArguments } from './arguments';
import { definedToolName, type ToolAnswer, type ToolCall, type ToolDefinition, type ToolRuntime } from './tool-types';

/**
 * A read tool's expected refusal (not found, not allowed): its message is shown to the model as is.
 *
 * @public
 */
export class ReadToolError extends Error {
  constructor(
    /** A stable code, capitals and underscores (`NOT_FOUND`): the answer's text reads `CODE: message`. */
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'ReadToolError';
  }
}

/**
 * What a read tool's handler gets besides its arguments: the services, the caller, the other tools.
 * @public
 */
export interface ReadToolContext<S extends ToolRuntime = ToolRuntime> {
  /** The server's services: the tool helpers' `ToolRuntime` and the team's own clients. */
  services: S;
  /** The authenticated caller: the only source of the tenant. */
  caller: Caller;
  /** The tools this server exposes, by name. */
  tools: ToolCall<S>['tools'];
}

/**
 * `S`: the services the tool needs (see ToolRuntime).
 *
 * @public
 */
export interface ReadToolSpec<Shape extends z.ZodRawShape, Out extends z.ZodObject, S extends ToolRuntime = ToolRuntime> {
  /** MCP's tool-name charset (`get_order`, `orders.get`); a bad one throws where the tool is defined. */
  name: string;
  /** A short human-readable name, for `tools/list` and its annotations. */
  title: string;
  /** What the tool does, for the model. */
  description: string;
  /** The arguments' zod shape: a call whose arguments fail it answers INVALID_ARGUMENTS and `execute` does not run. */
  input: Shape;
  /** The structured result (an object). */
  result: Out;
  /** `openWorldHint`: does it read a system outside this service? */
  annotations: { openWorldHint: boolean };
  /** Reads only; scope every lookup to `ctx.caller.tenant`. Throw ReadToolError for an expected refusal. */
  execute(args: z.output<z.ZodObject<Shape>>, ctx: ReadToolContext<S>): Promise<z.output<Out>>;
}

function errorResult(code: string, message: string): CallToolResult {
  return { content: [{ type: 'text', text: readErrorText(code, message) }], isError: true };
}

/**
 * Runs one call of a tool, as both servers do (the endpoint's, and `registerWriteTool`/`registerReadTool` on your
 * own): a `ReadToolError` a read tool written by hand throws (a gateway's pass-through read) is answered as a read
 * tool's refusal, the same answer `defineReadTool` gives for one its `execute` throws. Only a read tool's: a write
 * tool answers in the result contract, never a read's text, so one thrown by a write tool stays a failure.
 */
export async function callTool<S extends ToolRuntime>(
  tool: ToolDefinition<S>,
  args: Record<string, unknown> | undefined,
  call: ToolCall<S>,
): Promise<ToolAnswer> {
  try {
    return await tool.call(args, call);
  } catch (err) {
    if (err instanceof ReadToolError && tool.kind === 'read') return errorResult(err.code, err.message);
    throw err;
  }
}

/**
 * Read-only tools: validated like write tools, no idempotency (reading twice changes nothing).
 *
 * @public
 */
export function defineReadTool<Shape extends z.ZodRawShape, Out extends z.ZodObject, S extends ToolRuntime = ToolRuntime>(
  spec: ReadToolSpec<Shape, Out, S>,
): ToolDefinition<S> {
  definedToolName('defineReadTool', spec?.name);
  const inputSchema = z.object(spec.input);
  return {
    kind: 'read',
    name: spec.name,
    title: spec.title,
    description: spec.description,
    inputSchema,
    outputSchema: spec.result,
    annotations: {
      title: spec.title,
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: spec.annotations.openWorldHint,
    },
    async call(rawArgs, call) {
      const parsed = parseArguments(inputSchema, rawArgs);
      if (!parsed.ok) return errorResult(ErrorCode.INVALID_ARGUMENTS, parsed.message);
      try {
        const result = await spec.execute(parsed.data, { services: call.services, caller: call.caller, tools: call.tools });
        return {
          structuredContent: result as Record<string, unknown>,
          content: [{ type: 'text', text: JSON.stringify(result) }],
        };
      } catch (err) {
        if (err instanceof ReadToolError) return errorResult(err.code, err.message);
        call.services.logger.error('read tool failed unexpectedly', {
          tool: spec.name,
          tenant: call.caller.tenant,
          error_name: (err as Error)?.name,
        });
        return errorResult(ErrorCode.INTERNAL_ERROR, 'The read failed; try again shortly.');
      }
    },
  };
}
