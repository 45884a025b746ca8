import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IdempotencyEngine, InMemoryApprovalStore, InMemoryIdempotencyStore, type Execution } from 'idempotent-mcp/engine';
import { WriteResults } from '../core/result-contract';
import { mintConfirmationState, verifyConfirmationState } from './core/round-state';
import { ErrorCode } from '../core/errors';
import type { ConfirmationRequirement } from './gate';
import { chooseConfirmation, type ConfirmingProtocol } from '../mcp/confirmation-choice';
import type { EngineAnswer } from '../engine/write-request';

/**
 * Confirmation as the engine's gate (lambdas/confirmation/gate.ts), handed to the engine once at its construction: the
 * engine reads the key's record once; a held key answers from it without asking anyone, a free key is asked about
 * first, and runs only on the person's yes. How each client is asked is the MCP edge's choice
 * (lambdas/mcp/confirmation-choice.ts), made here as lambdas/mcp/confirmation.ts makes it.
 * The MCP side of the same: test/integration/mcp-confirmation-expiry.test.ts, mcp-confirmation, mcp-approval.
 */
const TENANT = 'tenant-gate';
const TOOL = 'pay_invoice';
const SECRET = 'g'.repeat(32);
const RETENTION_SECONDS = 60;
const POLICY = { retentionSeconds: RETENTION_SECONDS, onExpired: 'execute' } as const;

/** A client as the MCP edge sees it, and this call's side of the round. */
interface Round {
  client?: { protocol: ConfirmingProtocol; canElicitUrls: boolean; canElicitForms: boolean };
  formFallback?: boolean;
  requestState?: string;
  formAnswer?: 'yes' | 'no';
}

function setup() {
  let now = Date.UTC(2030, 0, 1);
  const clock = () => now;
  const store = new InMemoryIdempotencyStore();
  const reads = { get: 0, claim: 0, current: 0 };
  // The next record read finds the key free: the read of a call made just before another call claimed the key.
  let hideNextGet = false;
  // Counts the record's reads and claims, and the approval reads, as the engine and its gate make them.
  const counted = new Proxy(store, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop === 'get' && hideNextGet) {
        hideNextGet = false;
        return async () => (reads.get++, undefined);
      }
      if (prop === 'get' || prop === 'claim')
        return (...args: unknown[]) => (reads[prop]++, (value as (...a: unknown[]) => unknown).apply(target, args));
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const approvals = new InMemoryApprovalStore();
  const current = approvals.current.bind(approvals);
  approvals.current = (binding) => (reads.current++, current(binding));
  const engine = new IdempotencyEngine({
    store: counted,
    clock,
    sleep: async (ms) => void (now += ms),
    inProgressWaitMs: 50,
    confirmation: {
      approvals,
      logger: { warn: () => undefined },
      confirmations: {
        mint: async (binding, ttl) => mintConfirmationState(SECRET, binding, now, ttl),
        verify: async (binding, value) => verifyConfirmationState(SECRET, binding, value, now),
      },
    },
  });
  let runs = 0;
  const execute = async (): Promise<Execution<{ run: number }>> => ({ result: { run: ++runs } });
  /** This call's requirement, chosen for `client` (default: one that can be asked the tool's way). */
  const requirement = (mode: 'approval' | 'required', round: Round = {}): ConfirmationRequirement => {
    const client = round.client ?? { protocol: '2026-07-28', canElicitUrls: mode === 'approval', canElicitForms: mode === 'required' };
    const choice = chooseConfirmation({ mode, ...client, approvalPage: true, optedOut: false, formFallback: round.formFallback ?? false });
    if (choice.kind === 'run' || choice.kind === 'unavailable') throw new Error(`nobody is asked: ${choice.kind}`);
    const { requestState, formAnswer } = round;
    return { how: choice.kind, summary: 'Pay invoice inv-1', pageBase: 'https://pay.example.com', requestState, formAnswer };
  };
  const call = (key: string, confirmation: ConfirmationRequirement | undefined, onlyIfHeld?: ReturnType<typeof WriteResults.rejected>) =>
    engine.runConfirmed(
      { tenant: TENANT, tool: TOOL, idempotencyKey: key, args: { invoice_id: 'inv-1' }, onlyIfHeld },
      confirmation,
      POLICY,
      execute,
    );
  /** The person approves the current round on the page. */
  const approveOnPage = async (key: string) => {
    const round = (await current({ tenant: TENANT, tool: TOOL, idempotencyKey: key }))!;
    expect(await approvals.decide(round, { status: 'approved', by: 'alice', at: now, via: 'url' })).toMatchObject({ applied: true });
  };
  /** The person declines the current round on the page. */
  const declineOnPage = async (key: string) => {
    const round = (await current({ tenant: TENANT, tool: TOOL, idempotencyKey: key }))!;
    expect(await approvals.decide(round, { status: 'declined', by: 'alice', at: now, via: 'url' })).toMatchObject({ applied: true });
  };
  /** DynamoDB TTL deletes the key's record: it may, at any moment after the record's expiry. */
  const ttlDeletes = (key: string) => {
    const internals = store as unknown as { records: Map<string, unknown>; key(id: object): string };
    expect(internals.records.delete(internals.key({ tenant: TENANT, tool: TOOL, idempotencyKey: key }))).toBe(true);
  };
  const approval = (key: string) => current({ tenant: TENANT, tool: TOOL, idempotencyKey: key });
  return {
    engine,
    reads,
    call,
    requirement,
    approveOnPage,
    declineOnPage,
    ttlDeletes,
    approval,
    record: (key: string) => store.get({ tenant: TENANT, tool: TOOL, idempotencyKey: key }),
    runs: () => runs,
    advance: (ms: number) => void (now += ms),
    readsKeyFreeOnce: () => void (hideNextGet = true),
  };
}

const asked = (answer: EngineAnswer<unknown>, via: 'url' | 'form') => {
  expect(answer).toMatchObject({ outcome: 'needs_confirmation', ask: { via } });
  return (answer as Extract<EngineAnswer<unknown>, { outcome: 'needs_confirmation' }>).ask;
};

describe("a key whose settled record's retention ended (onExpired 'execute')", () => {
  it("an 'approval' tool asks the person again on the page before it runs again", async () => {
    const { call, requirement, approveOnPage, runs, advance } = setup();
    const key = `key-${randomUUID()}`;
    asked(await call(key, requirement('approval')), 'url');
    await approveOnPage(key);
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 1 } });
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: true, result: { run: 1 } });

    advance(RETENTION_SECONDS * 1000);
    // The key is free again: the approval the first run used approves no second run.
    const again = asked(await call(key, requirement('approval')), 'url');
    expect(again.via === 'url' && again.url).toMatch(/^https:\/\/pay\.example\.com\/approvals\//);
    expect(runs()).toBe(1);
    await approveOnPage(key);
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 2 } });
  });

  it("a 'required' tool asks again in a form; the old round's yes, sent again, runs nothing", async () => {
    const { call, requirement, runs, advance } = setup();
    const key = `key-${randomUUID()}`;
    const first = asked(await call(key, requirement('required')), 'form');
    const yes = { requestState: first.requestState, formAnswer: 'yes' as const };
    expect(await call(key, requirement('required', yes))).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 1 } });

    advance(RETENTION_SECONDS * 1000);
    // The first round's state is still within its lifetime (600 s): its recorded yes was used by the first run.
    expect(await call(key, requirement('required', yes))).toMatchObject({
      outcome: 'rejected',
      error: { code: ErrorCode.CONFIRMATION_INVALID },
    });
    const second = asked(await call(key, requirement('required')), 'form');
    expect(second.requestState).not.toBe(first.requestState);
    expect(runs()).toBe(1);
    expect(await call(key, requirement('required', { requestState: second.requestState, formAnswer: 'yes' }))).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
      result: { run: 2 },
    });
  });
});

/** The link a client without URL elicitation gets as its tool result (APPROVAL_REQUIRED), checked for its shape. */
const linkOf = (answer: EngineAnswer<unknown>) => {
  expect(answer).toMatchObject({ outcome: 'in_progress', retryable: true, error: { code: ErrorCode.APPROVAL_REQUIRED } });
  const url = (answer as { approval_url?: string }).approval_url!;
  expect(url).toMatch(/^https:\/\/pay\.example\.com\/approvals\//);
  expect((answer as { error: { message: string } }).error.message).toContain(
    `Ask the person to open this link, then call again with the same key: ${url}`,
  );
  return url;
};

describe('an approval authorizes one run, whatever TTL deletes', () => {
  it('retention 60 s, link 900 s: the record deleted after its retention, the next call asks the person again; one run', async () => {
    const { call, requirement, approveOnPage, ttlDeletes, approval, record, runs, advance } = setup();
    const key = `key-${randomUUID()}`;
    const first = asked(await call(key, requirement('approval')), 'url');
    await approveOnPage(key);
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 1 } });
    // The approval says which run used it: the owner token of the record that run claimed.
    const ran = (await record(key))!;
    expect(await approval(key)).toMatchObject({ status: 'approved', usedBy: ran.ownerToken, usedAt: ran.createdAt });

    advance(RETENTION_SECONDS * 1000 + 1000);
    ttlDeletes(key);
    // The approval is 61 s old, its link lived 900 s: still the used approval says no second run.
    const again = asked(await call(key, requirement('approval')), 'url');
    expect(runs()).toBe(1);
    expect(again.via === 'url' && again.approvalId).not.toBe(first.via === 'url' && first.approvalId);
    expect(await approval(key)).toMatchObject({ status: 'pending', round: 2 });
  });

  it('a client given the link (form only, 2025-11-25): the same record deleted, a new link, no second run', async () => {
    const { call, requirement, approveOnPage, ttlDeletes, runs, advance } = setup();
    const key = `key-${randomUUID()}`;
    const legacy = requirement('approval', { client: { protocol: '2025-11-25', canElicitUrls: false, canElicitForms: false } });
    const first = linkOf(await call(key, legacy));
    await approveOnPage(key);
    expect(await call(key, legacy)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 1 } });
    advance(RETENTION_SECONDS * 1000 + 1000);
    ttlDeletes(key);
    expect(linkOf(await call(key, legacy))).not.toBe(first);
    expect(runs()).toBe(1);
  });

  it('in the form path, an operation asked on the page: its used yes approves no second run', async () => {
    const { call, requirement, approveOnPage, runs, advance, ttlDeletes } = setup();
    const key = `key-${randomUUID()}`;
    asked(await call(key, requirement('approval')), 'url');
    await approveOnPage(key);
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', result: { run: 1 } });
    advance(RETENTION_SECONDS * 1000);
    // The operator allows the form fallback; the client now declares forms only. Its record expired, then deleted.
    const formOnly = requirement('approval', {
      client: { protocol: '2026-07-28', canElicitUrls: false, canElicitForms: true },
      formFallback: true,
    });
    const expired = await call(key, formOnly);
    expect(runs()).toBe(1);
    ttlDeletes(key);
    const deleted = await call(key, formOnly);
    expect(runs()).toBe(1);
    // Not a form in place of the page: the page's link, a new round for the person to decide.
    expect(linkOf(deleted)).toBe(linkOf(expired));
  });
});

describe('a client without URL elicitation gets the link as a tool result', () => {
  const clients = {
    'form only (Claude Code)': { protocol: '2026-07-28', canElicitUrls: false, canElicitForms: true },
    'none (claude.ai, Codex with URL mode off)': { protocol: '2026-07-28', canElicitUrls: false, canElicitForms: false },
    '2025-11-25': { protocol: '2025-11-25', canElicitUrls: false, canElicitForms: false },
  } as const;

  it.each(Object.entries(clients))('%s: the same link until the person decides; their yes runs once', async (_name, client) => {
    const { call, requirement, approveOnPage, runs } = setup();
    const key = `key-${randomUUID()}`;
    const confirm = requirement('approval', { client });
    const url = linkOf(await call(key, confirm));
    // The client (or the person's agent) calls again before anyone decided: the same link, never a run.
    expect(linkOf(await call(key, confirm))).toBe(url);
    expect(runs()).toBe(0);
    await approveOnPage(key);
    expect(await call(key, confirm)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { run: 1 } });
    expect(await call(key, confirm)).toMatchObject({ outcome: 'succeeded', replayed: true, result: { run: 1 } });
    expect(runs()).toBe(1);
  });

  it.each(Object.entries(clients))('%s: declined, nothing runs and the key stays free', async (_name, client) => {
    const { call, requirement, declineOnPage, approveOnPage, record, runs, advance } = setup();
    const key = `key-${randomUUID()}`;
    const confirm = requirement('approval', { client });
    const url = linkOf(await call(key, confirm));
    await declineOnPage(key);
    expect(await call(key, confirm)).toMatchObject({ outcome: 'rejected', error: { code: ErrorCode.CONFIRMATION_DECLINED } });
    expect(runs()).toBe(0);
    expect(await record(key)).toBeUndefined();
    // After the declined link's lifetime, the key asks anew (it is still free).
    advance(900 * 1000);
    expect(linkOf(await call(key, confirm))).not.toBe(url);
    await approveOnPage(key);
    expect(await call(key, confirm)).toMatchObject({ outcome: 'succeeded', result: { run: 1 } });
  });
});

describe('the engine reads the record once', () => {
  it('a held key answers from that read: no claim, and nobody is asked', async () => {
    const { call, requirement, reads, approveOnPage } = setup();
    const key = `key-${randomUUID()}`;
    asked(await call(key, requirement('approval')), 'url');
    await approveOnPage(key);
    await call(key, requirement('approval'));
    Object.assign(reads, { get: 0, claim: 0, current: 0 });

    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(reads).toEqual({ get: 1, claim: 0, current: 0 });
  });

  it('a free key: one read, the person asked, then the claim', async () => {
    const { call, requirement, reads, approveOnPage } = setup();
    const key = `key-${randomUUID()}`;
    asked(await call(key, requirement('approval')), 'url');
    expect(reads).toEqual({ get: 1, claim: 0, current: 1 });
    await approveOnPage(key);
    Object.assign(reads, { get: 0, claim: 0, current: 0 });
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(reads).toEqual({ get: 1, claim: 1, current: 1 });
  });

  it("a call that read the key free before another call's run claimed it is answered from that run's record, not asked again", async () => {
    const { call, requirement, approveOnPage, approval, runs, readsKeyFreeOnce } = setup();
    const key = `key-${randomUUID()}`;
    asked(await call(key, requirement('approval')), 'url');
    await approveOnPage(key);
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: false });
    const rounds = (await approval(key))!.log.length;
    // Its read came before the other call's claim: the yes it finds is used, by that run.
    readsKeyFreeOnce();
    expect(await call(key, requirement('approval'))).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(runs()).toBe(1);
    // No new round was opened for the person.
    expect((await approval(key))!.log).toHaveLength(rounds);
  });

  it('an operation id past its expiry is answered only from its record', async () => {
    const { call, runs } = setup();
    const key = `key-${randomUUID()}`;
    const refusal = WriteResults.rejected(key, { code: ErrorCode.UNKNOWN_OPERATION_ID, message: 'expired' });
    expect(await call(key, undefined, refusal)).toBe(refusal);
    expect(await call(key, undefined)).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(await call(key, undefined, refusal)).toMatchObject({ outcome: 'succeeded', replayed: true });
    expect(runs()).toBe(1);
  });
});
