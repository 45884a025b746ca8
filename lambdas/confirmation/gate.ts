import {
  type ApprovalMode,
  type ApprovalRecord,
  approvalState,
  approvalUsable,
  DEFAULT_APPROVAL_TTL_SECONDS,
  FORM_CLIENT,
  newApproval,
} from './core/approval';
import { APPROVALS_PATH } from '../core/endpoint-paths';
import { type ConfirmationBinding, confirmationStateNonce } from './core/round-state';
import type { Clock } from '../core/clock';
import { ErrorCode, SecretUnavailableError } from '../core/errors';
import { WriteResults, type WriteToolResult } from '../core/result-contract';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { ApprovalStore } from './approval-store';
import type { ConfirmationSigner } from './signer';
import type { NeedsConfirmation } from '../engine/write-request';

/**
 * The engine's gate for a tool a person confirms, handed to the engine once (`EngineOptions.confirmation`): asked by
 * the engine only when its one read of the record found the key free (a key whose record answers the call replays,
 * conflicts or waits without asking anyone). It says whether the call runs now, or what to answer instead: ask the
 * person (on the approval page or in a form the client shows), or refuse. Nothing here writes an idempotency record:
 * a declined or unanswered call leaves the key free. Every decision is kept in the approval record (when there is an
 * approval store), so a round answered once cannot be answered again, whatever the client sends next.
 * Protocol-neutral: the protocol's edge (lambdas/mcp/confirmation.ts) chooses how this client's person is asked and
 * says why nobody can be, and turns an `ask` into its own request.
 */

/**
 * What the gate works with, given once when the engine is built (`EngineOptions.confirmation`): the people's
 * decisions, the round signer and where to log. The clock is the engine's.
 *
 * @public
 */
export interface ConfirmationPorts {
  /** Without it, no round is asked on the approval page, and form answers are not recorded. */
  approvals?: ApprovalStore;
  /** Signs and checks a round's `requestState`, so a person's answer is bound to the call it was asked about. */
  confirmations: ConfirmationSigner;
  /** Where the gate warns when the signing key cannot be read (the call is answered as a transient failure). */
  logger: Pick<Logger, 'warn'>;
  /** How long an approval link lives, in seconds. Default 900 (15 minutes). */
  approvalTtlSeconds?: number;
}

/**
 * A write request's confirmation requirement, as the protocol's edge chose it for this call: how the person is
 * asked and what, and this call's side of the round; or `how: 'nobody'`: nobody can be asked here, and a call whose
 * key is free is refused with `why` (CONFIRMATION_UNAVAILABLE), nothing run.
 *
 * @public
 */
export type ConfirmationRequirement =
  | {
      how: 'nobody';
      /** One sentence for the agent: why nobody can be asked, and what works instead. */
      why: string;
    }
  | {
      /**
       * 'page': the person decides on the approval page, sent there by an ask (`via: 'url'`); 'link': on the same
       * page, its link given as the call's answer (APPROVAL_REQUIRED), for a client that cannot send the person
       * there; 'form': the client shows the person a yes/no form (the client's word).
       */
      how: 'page' | 'link' | 'form';
      /** What the person is asked, e.g. "Pay 12.50 EUR to payee-7 (memo: "rent")", on one line (display-text.ts). */
      summary: string;
      /** The round token this call echoes (an ask's `requestState`): untrusted, verified here. */
      requestState?: string;
      /** The client's answer to that round's form: 'yes' only for an explicit yes; undefined when it sent none. */
      formAnswer?: 'yes' | 'no';
      /** The base URL of the approval page's links; needed only when the person is sent there. */
      pageBase?: string;
    };

/** A requirement under which somebody is asked. */
type Asking = Exclude<ConfirmationRequirement, { how: 'nobody' }>;

/** How the person is asked (`NeedsConfirmation['ask']`). */
export type ConfirmationAsk = NeedsConfirmation['ask'];

/**
 * The gate's answer: run now, ask the person, or answer this instead (nothing ran). `held`: the key was claimed since
 * the caller read it free (by the run that used the yes): the caller answers from its record.
 */
type GateVerdict = 'run' | 'held' | { ask: ConfirmationAsk } | { answer: WriteToolResult<never> };

/** A read fails fast (one attempt, seconds at most): Secrets Manager's brownouts last about this long. */
const SECRET_RETRY_AFTER_MS = 2000;

/** The key that signs operation ids and confirmations could not be read: nothing ran, try again shortly. */
export function secretUnavailable(
  err: SecretUnavailableError,
  key: string,
  logger: ConfirmationPorts['logger'],
  tool: string,
  what: string,
): WriteToolResult<never> {
  logger.warn(`${what} not checked: the key is unavailable`, { tool, reason: err.message });
  return WriteResults.transientFailure(
    key,
    { code: err.code, message: `The ${what} cannot be checked right now; nothing ran. Call again shortly with the same key.` },
    SECRET_RETRY_AFTER_MS,
  );
}

/** The run a 'run' verdict lets go: the owner token its idempotency record will carry, recorded as the approval's user. */
interface GatedRun {
  runId: string;
  /**
   * Whether the key is held now (read again). Asked before a new round replaces a yes another run used: that run
   * may have claimed the key after this call read it free, and its record, not a new round, answers this call.
   */
  keyHeld?: () => Promise<boolean>;
}

/** The gate's ports with the engine's clock. */
type GatePorts = ConfirmationPorts & { clock: Clock };

/** One call at the gate: the ports, what the edge asks for, the operation, the run a yes lets go. */
interface Gate {
  ports: GatePorts;
  requirement: Asking;
  binding: ConfirmationBinding;
  run: GatedRun;
}

/** How a client learns of a page round: an ask it answers (`via: 'url'`), or the link as the call's answer. */
type Delivery = 'ask' | 'link';

/**
 * Whether a call whose key is free may run now: 'run', or what to answer instead. `binding`: the operation (tenant,
 * tool, key and the arguments' fingerprint, as the engine computed it); `run`: the run a 'run' lets go.
 */
export type ConfirmationGate = (requirement: ConfirmationRequirement, binding: ConfirmationBinding, run: GatedRun) => Promise<GateVerdict>;

/** The gate over `ports`, built once with the engine (which gives its clock). */
export function createConfirmationGate(ports: GatePorts): ConfirmationGate {
  return async (requirement, binding, run) => {
    const { tool, idempotencyKey: key } = binding;
    if (requirement.how === 'nobody') return unavailable(key, requirement.why);
    const gate: Gate = { ports, requirement, binding, run };
    try {
      switch (requirement.how) {
        case 'page':
          return await approveOnPage(gate, 'ask');
        case 'link':
          return await approveOnPage(gate, 'link');
        case 'form':
          return await confirmInForm(gate);
      }
    } catch (err) {
      if (err instanceof SecretUnavailableError) return refuse(secretUnavailable(err, key, ports.logger, tool, 'confirmation'));
      throw err;
    }
  };
}

/**
 * The run uses `approval`'s yes, once (`ApprovalStore.use`, a conditional write): the approval, not the idempotency
 * record, remembers it, so a record deleted by TTL cannot make the yes count twice. Another call that used it first
 * is running (or ran) the operation under this key: this one hears its result by calling again.
 */
async function useApproval({ ports, binding, run }: Gate, approval: ApprovalRecord): Promise<GateVerdict> {
  const used = await approvalsOf(ports).use(approval, { at: ports.clock(), by: run.runId });
  if (used.applied) return 'run';
  return refuse(WriteResults.inProgress(binding.idempotencyKey, 1000));
}

const refuse = (answer: WriteToolResult<never>): GateVerdict => ({ answer });

/**
 * `until`: a client given the link (its calls cannot be told from retries) hears the decline until the declined
 * link's expiry, so the sentence says when the key asks again, and how to ask sooner.
 */
const declined = (key: string, until?: string) =>
  refuse(
    WriteResults.rejected(key, {
      code: ErrorCode.CONFIRMATION_DECLINED,
      message: until
        ? `The person declined the operation on the approval page; nothing ran. Until ${until} a call with this key hears this ` +
          'answer, after that it asks the person again; if they want it asked sooner, start over under a new key (for an operation id: issue_operation_id).'
        : 'The person did not confirm the operation; nothing ran and the key is still free. Do not retry unless they ask you to.',
    }),
  );

const unavailable = (key: string, message: string) =>
  refuse(WriteResults.rejected(key, { code: ErrorCode.CONFIRMATION_UNAVAILABLE, message }));

/** The approval store a page round is kept in: without one, the edge should not have chosen the page. */
function approvalsOf(ports: GatePorts): ApprovalStore {
  if (!ports.approvals) throw new Error("an approval page round needs an approval store (the confirmation ports' approvals)");
  return ports.approvals;
}

type StateCheck = { kind: 'none' } | { kind: 'valid'; nonce: string | undefined } | { kind: 'expired' } | { kind: 'invalid' };

async function checkState({ ports, requirement, binding }: Gate): Promise<StateCheck> {
  const { requestState } = requirement;
  if (requestState === undefined) return { kind: 'none' };
  const check = await ports.confirmations.verify(binding, requestState);
  if (check.valid) return { kind: 'valid', nonce: confirmationStateNonce(requestState) };
  return check.reason === 'expired' ? { kind: 'expired' } : { kind: 'invalid' };
}

const invalidState = (key: string, expired: boolean) =>
  refuse(
    WriteResults.rejected(key, {
      code: ErrorCode.CONFIRMATION_INVALID,
      message: expired
        ? 'The confirmation came too late; nothing ran. Call again with the same key to ask the person anew.'
        : 'This confirmation is not one this server asked for these arguments; nothing ran. Call again without it to ask the person.',
    }),
  );

/**
 * The operation's next approval round and the requestState it is asked under (the state's nonce is the round's),
 * appended to the log of every earlier round; or the approval another call opened meanwhile. Undefined when the log
 * has room for no more rounds (`canOpenRound`).
 */
async function openApproval({ ports, requirement, binding }: Gate, mode: ApprovalMode, previous: ApprovalRecord | undefined) {
  const ttlSeconds = ports.approvalTtlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS;
  const requestState = await ports.confirmations.mint(binding, ttlSeconds);
  const record = newApproval(binding, {
    mode,
    summary: requirement.summary,
    now: ports.clock(),
    ttlSeconds,
    nonce: confirmationStateNonce(requestState),
    requestState,
    previous,
  });
  return record && approvalsOf(ports).open(record, previous);
}

/** The approval log is full: every round stays in it, so no new one is asked under this key. */
const roundsSpent = (key: string, tool: string) =>
  unavailable(
    key,
    `${tool} was asked for approval under this key as many times as its approval log keeps; nothing ran. ` +
      'Start again under a new key (for an operation id: issue_operation_id).',
  );

/**
 * The person decides on the approval page; only the record's decision counts, whatever the client answers. `delivery`:
 * how this client learns of the link (an ask it answers, or the link as the call's answer, which it shows).
 */
async function approveOnPage(gate: Gate, delivery: Delivery): Promise<GateVerdict> {
  const { ports, requirement, binding } = gate;
  const { tool, idempotencyKey: key } = binding;
  // Only an ask's round token comes back; a client given the link retries the same call.
  const answersRounds = delivery === 'ask';
  const state = answersRounds ? await checkState(gate) : ({ kind: 'none' } as StateCheck);
  if (state.kind === 'invalid') return invalidState(key, false);

  const current = await approvalsOf(ports).current(binding);
  let approval = current;
  const now = ports.clock();
  const status = approval ? approvalState(approval, binding.fingerprint, now) : undefined;
  // A yes authorizes one run: one used already (or left unused past the link's lifetime) approves no other: a new round below.
  if (status === 'approved' && approvalUsable(approval!, now)) return useApproval(gate, approval!);
  if (status === 'approved' && approval!.usedAt !== undefined && (await gate.run.keyHeld?.())) return 'held';
  // A decline is final for the round it answered: the same round (its requestState, or the retries of a client given the link while
  // the link would still be valid) hears it again. A new round (no requestState) asks anew: the key is still free.
  if (status === 'declined' && approval) {
    const sameRound = state.kind === 'valid' ? state.nonce === approval.nonce : !answersRounds && now < approval.expiresAt;
    if (sameRound) return declined(key, answersRounds ? undefined : new Date(approval.expiresAt).toISOString());
  }
  // A pending round asked in a form has no page: this client can send the person to one, so a page round replaces it.
  if (status !== 'pending' || approval!.mode !== 'url') approval = await openApproval(gate, 'url', current);
  if (!approval) return roundsSpent(key, tool);
  if (approval.fingerprint !== binding.fingerprint || approval.status !== 'pending' || approval.mode !== 'url') {
    // Lost a race to a call with other arguments or to a decision: the next call sees the winner.
    return refuse(
      WriteResults.transientFailure(
        key,
        {
          code: ErrorCode.OPERATION_IN_PROGRESS,
          message: 'Another call for this key is being approved; nothing ran. Call again shortly with the same key.',
        },
        1000,
      ),
    );
  }
  if (!requirement.pageBase) throw new Error("the approval link needs the endpoint's public base URL");
  const url = `${requirement.pageBase}${APPROVALS_PATH}/${approval.id}`;
  const expires = new Date(approval.expiresAt).toISOString();
  if (delivery === 'link') return refuse(WriteResults.approvalRequired(key, { url, summary: requirement.summary, expiresAt: expires }));
  return {
    ask: {
      via: 'url',
      approvalId: approval.id,
      url,
      message: `${requirement.summary}\n\nApprove or decline this on the ${tool} approval page (sign-in required). The link expires at ${expires}.`,
      requestState: approval.requestState,
    },
  };
}

/**
 * Form mode: the client's answer is the person's word; the first answer to a round is recorded and final. Only a
 * round asked in a form is answered here: a round asked on the approval page is decided there, by a signed-in person,
 * whatever this client declares now.
 */
async function confirmInForm(gate: Gate): Promise<GateVerdict> {
  const { ports, requirement, binding } = gate;
  const { tool, idempotencyKey: key } = binding;
  const state = await checkState(gate);
  if (state.kind === 'invalid' || state.kind === 'expired') return invalidState(key, state.kind === 'expired');
  const current = ports.approvals ? await ports.approvals.current(binding) : undefined;
  // Once the operation was asked on the page, it stays there: a client declaring only forms now cannot answer for
  // the person, nor open a form round in place of the page's (after an expiry or the person's decline either); it
  // gets the page's link to show instead.
  if (current?.mode === 'url' || current?.log.some((entry) => entry.event === 'requested' && entry.via === 'url')) {
    const status = approvalState(current, binding.fingerprint, ports.clock());
    if (status === 'declined' && state.kind === 'valid' && state.nonce === current.nonce) return declined(key);
    return approveOnPage(gate, 'link');
  }
  const ask = async (): Promise<GateVerdict> => {
    let requestState: string;
    if (ports.approvals) {
      const opened = await openApproval(gate, 'form', current);
      if (!opened) return roundsSpent(key, tool);
      // Another call opened a round on the page meanwhile: that one is the person's to decide.
      if (opened.mode !== 'form') return approveOnPage(gate, 'link');
      requestState = opened.requestState!;
    } else {
      requestState = await ports.confirmations.mint(binding);
    }
    return { ask: { via: 'form', message: `${requirement.summary}\n\nConfirm this operation?`, requestState } };
  };
  if (state.kind === 'none' || requirement.formAnswer === undefined) return ask();
  const yes = requirement.formAnswer === 'yes';
  if (!ports.approvals) return yes ? 'run' : declined(key);

  // MRTR: state that must be consumed once is enforced by the server. The round's record takes the first answer,
  // and only a round asked in a form takes one (the store checks the mode in the same conditional write).
  if (!current || current.nonce !== state.nonce) return invalidState(key, false);
  const decided = await ports.approvals.decide(current, {
    status: yes ? 'approved' : 'declined',
    by: FORM_CLIENT,
    at: ports.clock(),
    via: 'form',
  });
  if (decided.applied || decided.reason === 'decided') {
    if (decided.record.status !== 'approved') return declined(key);
    // The round's yes authorizes one run: used already, it approves no other (call again to be asked anew).
    return approvalUsable(decided.record, ports.clock()) ? useApproval(gate, decided.record) : invalidState(key, true);
  }
  if (decided.reason === 'mode') return approveOnPage(gate, 'link');
  return invalidState(key, decided.reason === 'expired');
}
