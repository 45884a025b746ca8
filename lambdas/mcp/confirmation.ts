import type { InputRequiredResult } from '@modelcontextprotocol/server';
import * as z from 'zod';
import type { ConfirmationBinding } from '../core/confirmation-state';
import { ErrorCode } from '../core/errors';
import { fingerprint } from '../core/fingerprint';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import { keyIsFree } from '../core/state-machine';
import { DEFAULT_POLICY, type IdempotencyPolicy } from '../engine/engine';
import { SecretUnavailableError } from '../core/errors';
import type { ToolCall, ToolRuntime } from './tool-types';

/**
 * 'required': the person confirms each operation before it runs (payments, deletes, publishing); 'none' (default):
 * the tool runs on the agent's call.
 */
export type Confirmation = 'required' | 'none';

/** The key of the one input request of a confirmation round, in `inputRequests` and in the answer's `inputResponses`. */
export const CONFIRM_INPUT = 'confirm';

/** The form the person answers: one explicit yes. */
const CONFIRM_FORM = {
  type: 'object' as const,
  properties: { confirm: { type: 'boolean' as const, title: 'Yes, do it', description: 'Tick to confirm this operation.', default: false } },
  required: ['confirm'],
};

/** The client's answer to the form (`ElicitResult`): only `accept` with `confirm: true` is a yes. */
const ConfirmAnswer = z.looseObject({
  action: z.enum(['accept', 'decline', 'cancel']),
  content: z.looseObject({ confirm: z.unknown() }).optional(),
});

/** The extension's own cache answers within milliseconds once Secrets Manager is back. */
export const SECRET_RETRY_AFTER_MS = 2000;

/** The key that signs operation ids and confirmations could not be read: nothing ran, try again shortly. */
export function secretUnavailable(err: SecretUnavailableError, key: string, call: ToolCall<ToolRuntime>, tool: string, what: string): WriteToolResult {
  call.services.logger.warn(`${what} not checked: the key is unavailable`, { tool, reason: err.message });
  return WriteResults.transientFailure(
    key,
    { code: err.code, message: `The ${what} cannot be checked right now; nothing ran. Call again shortly with the same key.` },
    SECRET_RETRY_AFTER_MS,
  );
}

/** Whether a tool's answer asks for input first (MCP 2026-07-28) rather than being its result. */
export const isInputRequired = (answer: object): answer is InputRequiredResult =>
  (answer as { resultType?: unknown }).resultType === 'input_required';

/** Whether the client of a 2026-07-28 request can show a form: `elicitation: {}` means form mode (MCP). */
export function canElicitForms(capabilities: unknown): boolean {
  const elicitation = (capabilities as { elicitation?: unknown } | undefined)?.elicitation;
  if (elicitation === null || typeof elicitation !== 'object') return false;
  const modes = elicitation as { form?: unknown; url?: unknown };
  return modes.form !== undefined || modes.url === undefined;
}

export interface ConfirmationRequest {
  tool: string;
  key: string;
  /** The business arguments, as the engine fingerprints them. */
  args: Record<string, unknown>;
  /** What the person is asked, e.g. "Pay 12.50 EUR to payee-7 (memo: rent)". */
  summary: string;
  policy: IdempotencyPolicy;
  call: ToolCall<ToolRuntime>;
}

/**
 * Decides whether a `confirmation: 'required'` call may run now: 'run', or the answer to send instead (the form for
 * the person, or `rejected`). Nothing here writes a record: a declined or unanswered call leaves the key free.
 */
export async function confirmBeforeRunning(request: ConfirmationRequest): Promise<'run' | WriteToolResult | InputRequiredResult> {
  const { tool, key, args, summary, policy, call } = request;
  const { services } = call;
  // Once the operation ran (or runs), its key answers from the record: a retry replays without asking again.
  const existing = await services.store.get({ tenant: call.caller.tenant, tool, idempotencyKey: key });
  if (existing && !keyIsFree(existing, services.clock(), policy.onExpired ?? DEFAULT_POLICY.onExpired)) return 'run';

  if (call.era !== 'modern') {
    if (services.config.confirmationOptOut.includes(tool)) return 'run';
    return WriteResults.rejected(key, {
      code: ErrorCode.CONFIRMATION_UNAVAILABLE,
      message:
        `${tool} runs only after the person confirms it, and this server asks through an MCP 2026-07-28 input request, ` +
        'which a client of an earlier protocol version cannot answer; nothing ran. Use a client that speaks MCP 2026-07-28 ' +
        'and can show a form (elicitation), for example Claude Code or Claude Desktop; or, where this client asks the person ' +
        `itself, the operator lists ${tool} in CONFIRMATION_OPT_OUT_TOOLS (deployed: the confirmationOptOut setting).`,
    });
  }
  if (!call.canElicitForms) {
    return WriteResults.rejected(key, {
      code: ErrorCode.CONFIRMATION_UNAVAILABLE,
      message:
        `${tool} runs only after the person confirms it in a form, and this client declares no form elicitation capability; nothing ran. ` +
        'Use a client that declares elicitation (form mode), for example Claude Code or Claude Desktop.',
    });
  }

  const binding: ConfirmationBinding = { tenant: call.caller.tenant, tool, idempotencyKey: key, fingerprint: fingerprint(args, policy.nonBusinessFields) };
  try {
    // The wire shape of MCP 2026-07-28 written out, not the SDK's builder: the reconciler and the outbox functions
    // load the tool registry, and must not carry the MCP server SDK for it.
    const ask = async (): Promise<InputRequiredResult> => ({
      resultType: 'input_required',
      inputRequests: {
        [CONFIRM_INPUT]: {
          method: 'elicitation/create',
          params: { mode: 'form', message: `${summary}\n\nConfirm this operation?`, requestedSchema: CONFIRM_FORM },
        },
      },
      requestState: await services.confirmations.mint(binding),
    });
    if (call.requestState === undefined) return await ask();
    const check = await services.confirmations.verify(binding, call.requestState);
    if (!check.valid) {
      return WriteResults.rejected(key, {
        code: ErrorCode.CONFIRMATION_INVALID,
        message:
          check.reason === 'expired'
            ? 'The confirmation came too late; nothing ran. Call again with the same key to ask the person anew.'
            : 'This confirmation is not one this server asked for these arguments; nothing ran. Call again without it to ask the person.',
      });
    }
    const raw = call.inputResponses?.[CONFIRM_INPUT];
    if (raw === undefined) return await ask();
    const answer = ConfirmAnswer.safeParse(raw);
    if (answer.success && answer.data.action === 'accept' && answer.data.content?.confirm === true) return 'run';
    return WriteResults.rejected(key, {
      code: ErrorCode.CONFIRMATION_DECLINED,
      message: 'The person did not confirm the operation; nothing ran and the key is still free. Do not retry unless they ask you to.',
    });
  } catch (err) {
    if (err instanceof SecretUnavailableError) return secretUnavailable(err, key, call, tool, 'confirmation');
    throw err;
  }
}
