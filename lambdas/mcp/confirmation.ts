import type { InputRequiredResult } from '@modelcontextprotocol/server';
import * as z from 'zod';
import { type ApprovalMode, type ApprovalRecord, approvalState, DEFAULT_APPROVAL_TTL_SECONDS, MCP_CLIENT, newApproval } from '../core/approval';
import { type ConfirmationBinding, confirmationStateNonce } from '../core/confirmation-state';
import { ErrorCode } from '../core/errors';
import { fingerprint } from '../core/fingerprint';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import { keyIsFree } from '../core/state-machine';
import { DEFAULT_POLICY, type IdempotencyPolicy } from '../engine/engine';
import { SecretUnavailableError } from '../core/errors';
import type { ToolCall, ToolRuntime, UrlElicitationRequired } from './tool-types';

/**
 * 'approval': the person approves each operation on the endpoint's own approval page, signed in (MCP URL-mode
 * elicitation): what the MCP specification requires for authorizing transactions, and the only mode no agent host
 * can answer for the person (payments). 'required': the person confirms in a form the MCP client shows (the
 * client's word). 'none' (default): the tool runs on the agent's call.
 */
export type Confirmation = 'approval' | 'required' | 'none';

/** The key of the one input request of a confirmation round, in `inputRequests` and in the answer's `inputResponses`. */
const CONFIRM_INPUT = 'confirm';

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

/** A read fails fast (one attempt, seconds at most): Secrets Manager's brownouts last about this long. */
const SECRET_RETRY_AFTER_MS = 2000;

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

/** Whether the client of a 2026-07-28 request can send the person to a URL: it declares `elicitation: { url: {} }`. */
export function canElicitUrls(capabilities: unknown): boolean {
  const elicitation = (capabilities as { elicitation?: unknown } | undefined)?.elicitation;
  return elicitation !== null && typeof elicitation === 'object' && (elicitation as { url?: unknown }).url !== undefined;
}

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
  /** What the person is asked, e.g. "Pay 12.50 EUR to payee-7 (memo: "rent")", on one line (display-text.ts). */
  summary: string;
  mode: Exclude<Confirmation, 'none'>;
  policy: IdempotencyPolicy;
  call: ToolCall<ToolRuntime>;
}

type Decision = 'run' | WriteToolResult | InputRequiredResult | UrlElicitationRequired;

/** The path of the approval page; the link is `<base>/approvals/<approval id>`. */
export const APPROVALS_PATH = '/approvals';
/** Where the issuer sends the person back after sign-in: the redirect URI registered with the page's client. */
export const APPROVAL_CALLBACK_PATH = `${APPROVALS_PATH}/callback`;

const declined = (key: string) =>
  WriteResults.rejected(key, {
    code: ErrorCode.CONFIRMATION_DECLINED,
    message: 'The person did not confirm the operation; nothing ran and the key is still free. Do not retry unless they ask you to.',
  });

const unavailable = (key: string, message: string) => WriteResults.rejected(key, { code: ErrorCode.CONFIRMATION_UNAVAILABLE, message });

/**
 * Decides whether a confirmation-required call may run now: 'run', or the answer to send instead (the form or the
 * approval link for the person, or `rejected`). Nothing here writes an idempotency record: a declined or unanswered
 * call leaves the key free. Every decision is kept in the approval record (when the runtime has an approval store),
 * so a round answered once cannot be answered again, whatever the client sends next.
 */
export async function confirmBeforeRunning(request: ConfirmationRequest): Promise<Decision> {
  const { tool, key, policy, call, mode } = request;
  const { services } = call;
  // Once the operation ran (or runs), its key answers from the record: a retry replays without asking again.
  const existing = await services.store.get({ tenant: call.caller.tenant, tool, idempotencyKey: key });
  if (existing && !keyIsFree(existing, services.clock(), policy.onExpired ?? DEFAULT_POLICY.onExpired)) return 'run';

  try {
    if (mode === 'approval') {
      if (!services.approvals)
        return unavailable(key, `${tool} runs only after the person approves it on this endpoint's approval page, and this server has no approval page configured; nothing ran.`);
      if (call.era === 'modern') {
        if (call.canElicitUrls) return await approveOnPage(request);
        if (call.canElicitForms && services.config.confirmationFormFallback?.includes(tool)) return await confirmInForm(request);
        return unavailable(
          key,
          `${tool} runs only after the person approves it on this endpoint's approval page, and this client declares no URL-mode ` +
            'elicitation (capability elicitation.url), so it cannot send them there; nothing ran. Use a client that supports URL ' +
            'elicitation, or ask the operator to allow form confirmation for this tool (CONFIRMATION_FORM_FALLBACK_TOOLS).',
        );
      }
      // The operator's choice first: clients of this deployment confirm on their side.
      if (services.config.confirmationOptOut.includes(tool)) return 'run';
      // 2025-11-25 has URL elicitation as an error the client answers by sending the person to the link, then retrying.
      if (call.protocolVersion === '2025-11-25') return await approveOnPage(request);
      return unavailable(
        key,
        `${tool} runs only after the person approves it on this endpoint's approval page, which a client of protocol version ` +
          `${call.protocolVersion ?? 'before 2025-11-25'} cannot be sent to; nothing ran. Use a client that speaks MCP 2026-07-28 or 2025-11-25 with URL elicitation.`,
      );
    }

    if (call.era !== 'modern') {
      if (services.config.confirmationOptOut.includes(tool)) return 'run';
      return unavailable(
        key,
        `${tool} runs only after the person confirms it, and this server asks through an MCP 2026-07-28 input request, ` +
          'which a client of an earlier protocol version cannot answer; nothing ran. Use a client that speaks MCP 2026-07-28 ' +
          'and can show a form (elicitation), for example Claude Code or Claude Desktop; or, where this client asks the person ' +
          `itself, the operator lists ${tool} in CONFIRMATION_OPT_OUT_TOOLS (deployed: the confirmationOptOut setting).`,
      );
    }
    if (!call.canElicitForms)
      return unavailable(
        key,
        `${tool} runs only after the person confirms it in a form, and this client declares no form elicitation capability; nothing ran. ` +
          'Use a client that declares elicitation (form mode), for example Claude Code or Claude Desktop.',
      );
    return await confirmInForm(request);
  } catch (err) {
    if (err instanceof SecretUnavailableError) return secretUnavailable(err, key, call, tool, 'confirmation');
    throw err;
  }
}

const bindingOf = ({ tool, key, args, policy, call }: ConfirmationRequest): ConfirmationBinding => ({
  tenant: call.caller.tenant,
  tool,
  idempotencyKey: key,
  fingerprint: fingerprint(args, policy.nonBusinessFields),
});

type StateCheck = { kind: 'none' } | { kind: 'valid'; nonce: string | undefined } | { kind: 'expired' } | { kind: 'invalid' };

async function checkState(request: ConfirmationRequest, binding: ConfirmationBinding): Promise<StateCheck> {
  const { requestState } = request.call;
  if (requestState === undefined) return { kind: 'none' };
  const check = await request.call.services.confirmations.verify(binding, requestState);
  if (check.valid) return { kind: 'valid', nonce: confirmationStateNonce(requestState) };
  return check.reason === 'expired' ? { kind: 'expired' } : { kind: 'invalid' };
}

const invalidState = (key: string, expired: boolean) =>
  WriteResults.rejected(key, {
    code: ErrorCode.CONFIRMATION_INVALID,
    message: expired
      ? 'The confirmation came too late; nothing ran. Call again with the same key to ask the person anew.'
      : 'This confirmation is not one this server asked for these arguments; nothing ran. Call again without it to ask the person.',
  });

/**
 * The operation's next approval round and the requestState it is asked under (the state's nonce is the round's),
 * appended to the log of every earlier round; or the approval another call opened meanwhile. Undefined when the log
 * has room for no more rounds (`canOpenRound`).
 */
async function openApproval(request: ConfirmationRequest, binding: ConfirmationBinding, mode: ApprovalMode, previous: ApprovalRecord | undefined) {
  const { services } = request.call;
  const ttlSeconds = services.config.approvalTtlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS;
  const requestState = await services.confirmations.mint(binding, ttlSeconds);
  const record = newApproval(binding, {
    mode,
    summary: request.summary,
    now: services.clock(),
    ttlSeconds,
    nonce: confirmationStateNonce(requestState),
    requestState,
    previous,
  });
  return record && services.approvals!.open(record, previous);
}

/** The approval log is full: every round stays in it, so no new one is asked under this key. */
const roundsSpent = (key: string, tool: string) =>
  unavailable(
    key,
    `${tool} was asked for approval under this key as many times as its approval log keeps; nothing ran. ` +
      'Start again under a new key (for an operation id: issue_operation_id).',
  );

/** URL mode: the person decides on the approval page; only the record's decision counts, whatever the client answers. */
async function approveOnPage(request: ConfirmationRequest): Promise<Decision> {
  const { key, call, tool } = request;
  const { services } = call;
  const binding = bindingOf(request);
  const state = call.era === 'modern' ? await checkState(request, binding) : ({ kind: 'none' } as StateCheck);
  if (state.kind === 'invalid') return invalidState(key, false);

  const current = await services.approvals!.current(binding);
  let approval = current;
  const now = services.clock();
  const status = approval ? approvalState(approval, binding.fingerprint, now) : undefined;
  if (status === 'approved') return 'run';
  // A decline is final for the round it answered: the same round (its requestState, or a 2025 client's retries while
  // the link would still be valid) hears it again. A new round (no requestState) asks anew: the key is still free.
  if (status === 'declined' && approval) {
    const sameRound = state.kind === 'valid' ? state.nonce === approval.nonce : call.era !== 'modern' && now < approval.expiresAt;
    if (sameRound) return declined(key);
  }
  // A pending round asked in a form has no page: this client can send the person to one, so a page round replaces it.
  if (status !== 'pending' || approval!.mode !== 'url') approval = await openApproval(request, binding, 'url', current);
  if (!approval) return roundsSpent(key, tool);
  if (approval.fingerprint !== binding.fingerprint || approval.status !== 'pending' || approval.mode !== 'url') {
    // Lost a race to a call with other arguments or to a decision: the next call sees the winner.
    return WriteResults.transientFailure(key, { code: ErrorCode.OPERATION_IN_PROGRESS, message: 'Another call for this key is being approved; nothing ran. Call again shortly with the same key.' }, 1000);
  }
  const base = services.config.approvalBaseUrl ?? services.config.publicBaseUrl ?? call.origin;
  if (!base) throw new Error('the approval link needs the endpoint\'s public base URL');
  const url = `${base}${APPROVALS_PATH}/${approval.id}`;
  const message = `${request.summary}\n\nApprove or decline this on the ${tool} approval page (sign-in required). The link expires at ${new Date(approval.expiresAt).toISOString()}.`;
  if (call.era !== 'modern') {
    return {
      resultType: 'url_elicitation_required',
      message: `The person must approve this on the approval page first: ${url} . Nothing ran; call again with the same key once they have decided.`,
      elicitations: [{ mode: 'url', elicitationId: approval.id, url, message }],
    };
  }
  return {
    resultType: 'input_required',
    inputRequests: { [CONFIRM_INPUT]: { method: 'elicitation/create', params: { mode: 'url', message, url, elicitationId: approval.id } } },
    requestState: approval.requestState!,
  };
}

/**
 * Form mode: the client's answer is the person's word; the first answer to a round is recorded and final. Only a
 * round asked in a form is answered here: a round asked on the approval page is decided there, by a signed-in person,
 * whatever this client declares now.
 */
async function confirmInForm(request: ConfirmationRequest): Promise<Decision> {
  const { key, call, tool } = request;
  const { services } = call;
  const binding = bindingOf(request);
  const state = await checkState(request, binding);
  if (state.kind === 'invalid' || state.kind === 'expired') return invalidState(key, state.kind === 'expired');
  const current = services.approvals ? await services.approvals.current(binding) : undefined;
  // Once the operation was asked on the page, it stays there: a client declaring only forms now cannot answer for
  // the person, nor open a form round in place of the page's (after an expiry or the person's decline either).
  if (current?.mode === 'url' || current?.log.some((entry) => entry.event === 'requested' && entry.via === 'url')) {
    const status = approvalState(current, binding.fingerprint, services.clock());
    // The person approved these arguments on the page.
    if (current.mode === 'url' && status === 'approved') return 'run';
    if (status === 'declined' && state.kind === 'valid' && state.nonce === current.nonce) return declined(key);
    return onThePage(key, tool);
  }
  const ask = async (): Promise<Decision> => {
    let requestState: string;
    if (services.approvals) {
      const opened = await openApproval(request, binding, 'form', current);
      if (!opened) return roundsSpent(key, tool);
      // Another call opened a round on the page meanwhile: that one is the person's to decide.
      if (opened.mode !== 'form') return onThePage(key, tool);
      requestState = opened.requestState!;
    } else {
      requestState = await services.confirmations.mint(binding);
    }
    return {
      resultType: 'input_required',
      inputRequests: {
        [CONFIRM_INPUT]: {
          method: 'elicitation/create',
          params: { mode: 'form', message: `${request.summary}\n\nConfirm this operation?`, requestedSchema: CONFIRM_FORM },
        },
      },
      requestState,
    };
  };
  if (state.kind === 'none') return ask();
  const raw = call.inputResponses?.[CONFIRM_INPUT];
  if (raw === undefined) return ask();
  const answer = ConfirmAnswer.safeParse(raw);
  const yes = answer.success && answer.data.action === 'accept' && answer.data.content?.confirm === true;
  if (!services.approvals) return yes ? 'run' : declined(key);

  // MRTR: state that must be consumed once is enforced by the server. The round's record takes the first answer,
  // and only a round asked in a form takes one (the store checks the mode in the same conditional write).
  if (!current || current.nonce !== state.nonce) return invalidState(key, false);
  const decided = await services.approvals.decide(current, { status: yes ? 'approved' : 'declined', by: MCP_CLIENT, at: services.clock(), via: 'form' });
  if (decided.applied || decided.reason === 'decided') return decided.record.status === 'approved' ? 'run' : declined(key);
  if (decided.reason === 'mode') return onThePage(key, tool);
  return invalidState(key, decided.reason === 'expired');
}

/** An operation asked on the approval page: only a signed-in person decides it, there. */
const onThePage = (key: string, tool: string) =>
  unavailable(
    key,
    `This ${tool} operation was asked for the person's approval on the approval page; only they decide it there, an ` +
      'answer in a form cannot, and nothing ran. Once they have approved it there, call again with the same key; for a ' +
      'new link, call from a client that declares URL elicitation (capability elicitation.url).',
  );
