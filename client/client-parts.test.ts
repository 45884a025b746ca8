import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProtocolError, ProtocolErrorCode, SdkError, SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprint } from '../lambdas/core/fingerprint';
import { validateIdempotencyKey } from '../lambdas/core/idempotency-key';
import { WriteResults } from '../lambdas/core/result-contract';
import { CallLedger, type CallIdentity } from './call-ledger';
import { newIdempotencyKey } from './idempotent-client';
import { HttpStatusError, backoffDelay, classifyCallError, parseRetryAfter } from './retry';
import { keyHint, shortId, statusLine } from './status-line';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'client-parts-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('keys', () => {
  it('are accepted by the server rules and never repeat', () => {
    const keys = new Set(Array.from({ length: 1000 }, newIdempotencyKey));
    expect(keys.size).toBe(1000);
    for (const key of keys) expect(validateIdempotencyKey(key)).toBe(key);
    // 18 random bytes = 144 bits, base64url (24 characters) after the prefix.
    expect([...keys][0]).toMatch(/^ik_[A-Za-z0-9_-]{24}$/);
  });
});

describe('backoff', () => {
  const options = { baseDelayMs: 100, maxDelayMs: 1000 };

  it('is full jitter under an exponential ceiling that stops at the cap', () => {
    expect([0, 1, 2, 3, 4, 10].map((i) => backoffDelay(i, options, () => 0.999999))).toEqual([99, 199, 399, 799, 999, 999]);
    expect(backoffDelay(3, options, () => 0)).toBe(0);
    expect(backoffDelay(3, options, () => 0.5)).toBe(400);
  });

  it("takes the server's retry_after_ms as a floor, even above the cap", () => {
    expect(backoffDelay(0, options, () => 0.5, 5000)).toBe(5000);
    expect(backoffDelay(4, options, () => 0.9, 10)).toBe(900);
  });

  it('reads Retry-After in seconds or as a date', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4_000)).toBe(6000);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter(null, 0)).toBeUndefined();
  });
});

describe('error classification', () => {
  const kind = (err: unknown) => classifyCallError(err).kind;
  // What the SDK's Streamable HTTP transport throws for an HTTP error answer.
  const httpError = (status: number, code = SdkErrorCode.ClientHttpNotImplemented) => new SdkHttpError(code, `HTTP ${status}`, { status });

  it('retries what may succeed later: 5xx, 429, 408, resets, refusals, timeouts, closed connections', () => {
    expect(kind(new HttpStatusError(503, 1000))).toBe('transport');
    expect(classifyCallError(new HttpStatusError(429, 2000)).retryAfterMs).toBe(2000);
    expect(kind(httpError(502))).toBe('transport');
    expect(kind(httpError(408))).toBe('transport');
    const reset = new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) });
    expect(kind(reset)).toBe('transport');
    expect(kind(Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }))).toBe('transport');
    expect(kind(new SdkError(SdkErrorCode.RequestTimeout, 'timed out'))).toBe('transport');
    expect(classifyCallError(new SdkError(SdkErrorCode.ConnectionClosed, 'closed'))).toMatchObject({
      kind: 'transport',
      connectionClosed: true,
    });
  });

  it('returns at once on what will fail again: auth, other 4xx, JSON-RPC errors, bugs', () => {
    expect(kind(httpError(401, SdkErrorCode.ClientHttpAuthentication))).toBe('deterministic');
    expect(kind(httpError(403, SdkErrorCode.ClientHttpForbidden))).toBe('deterministic');
    expect(kind(httpError(413))).toBe('deterministic');
    expect(kind(new ProtocolError(ProtocolErrorCode.InvalidParams, 'bad'))).toBe('deterministic');
    expect(kind(new ProtocolError(ProtocolErrorCode.MethodNotFound, 'no'))).toBe('deterministic');
    expect(kind(new RangeError('bug'))).toBe('deterministic');
  });
});

describe('call ledger', () => {
  const identity = (args: Record<string, unknown>, extra: Partial<CallIdentity> = {}): CallIdentity => ({
    session: 's1',
    tool: 'create_order',
    fingerprint: fingerprint(args),
    ...extra,
  });

  it('finds an intent by canonical business arguments, whatever the key order or trace id', () => {
    const ledger = new CallLedger();
    const entry = ledger.create(identity({ a: 1, b: [1, 2], trace_id: 't1' }), 'ik_key_one', 'idempotency_key');
    expect(ledger.find(identity({ b: [1, 2], a: 1, trace_id: 't2' }))).toBe(entry);
    expect(ledger.find(identity({ a: 1, b: [2, 1] }))).toBeUndefined();
    expect(ledger.find(identity({ a: 1, b: [1, 2] }, { session: 's2' }))).toBeUndefined();
    expect(ledger.find(identity({ a: 1, b: [1, 2] }, { tool: 'send_email' }))).toBeUndefined();
  });

  it('keeps a settled entry for the TTL after its answer, an unsettled one until the max age', () => {
    let now = 1_000_000;
    const ledger = new CallLedger({ ttlMs: 1000, maxAgeMs: 10_000, clock: () => now });
    const settled = ledger.create(identity({ n: 1 }), 'ik_settled1', 'idempotency_key');
    const unsettled = ledger.create(identity({ n: 2 }), 'ik_unsettled', 'idempotency_key');
    ledger.update(settled, { state: 'succeeded' });
    ledger.update(unsettled, { state: 'unknown' });
    now += 999;
    expect(ledger.find(identity({ n: 1 }))).toBe(settled);
    now += 1;
    expect(ledger.find(identity({ n: 1 }))).toBeUndefined();
    expect(ledger.find(identity({ n: 2 }))).toBe(unsettled);
    now = 1_000_000 + 10_000;
    expect(ledger.find(identity({ n: 2 }))).toBeUndefined();
  });

  it('never lets replays keep an entry past its max age', () => {
    let now = 0;
    const ledger = new CallLedger({ ttlMs: 1000, maxAgeMs: 2500, clock: () => now });
    const entry = ledger.create(identity({ n: 3 }), 'ik_replayed', 'idempotency_key');
    for (now = 500; now <= 2000; now += 500) ledger.update(entry, { state: 'succeeded' });
    expect(entry.expiresAt).toBe(2500);
  });

  it('survives a restart through its file, written atomically and private to the user', async () => {
    const file = join(dir, 'nested', 'ledger.json');
    const first = await CallLedger.open({ file });
    const entry = first.create(identity({ n: 4 }), 'ik_persisted', 'idempotency_key');
    first.update(entry, { state: 'unknown', attempts: 2 });
    await Promise.all([first.persist(), first.persist(), first.persist()]);
    expect(await readdir(join(dir, 'nested'))).toEqual(['ledger.json']); // no temp files left behind
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readFile(file, 'utf8')).not.toContain('"n"'); // the arguments are not stored, only their hash

    const second = await CallLedger.open({ file });
    expect(second.find(identity({ n: 4 }))).toMatchObject({ key: 'ik_persisted', state: 'unknown', attempts: 2 });
  });

  it('refuses a corrupt file rather than forgetting its keys', async () => {
    const file = join(dir, 'corrupt.json');
    await writeFile(file, '{"not": "a ledger"}');
    await expect(CallLedger.open({ file })).rejects.toThrow(/not a call ledger/);
  });
});

describe('status line', () => {
  it('names the call, its outcome and the ids a model needs', () => {
    const key = 'op_01J9ZB7Q8XAAAABBBBCCCCK3M2QD';
    const result = WriteResults.succeeded(
      key,
      { payee_id: 'payee-7', payment_id: 'pay_123', status: 'captured', amount_minor: 500 },
      { firstExecutedAt: 0 },
    );
    // payee_id echoes an argument: not news, left out.
    expect(
      statusLine({ tool: 'request_payment', key, state: 'succeeded', attempts: 2, result, argumentNames: ['payee_id', 'amount_minor'] }),
    ).toBe('request_payment op_…K3M2QD : succeeded (replayed), payment_id pay_123, status captured [2 attempts]');
  });

  it('says what to do next when there is no final answer', () => {
    const unknown = WriteResults.unknown('ik_k1k1k1k1', 5000);
    expect(statusLine({ tool: 'create_order', key: 'ik_k1k1k1k1', state: 'unknown', attempts: 1, result: unknown })).toBe(
      'create_order ik_k1k1k1k1 : unknown, being verified; call again with the same key after 5 s, never a new one',
    );
    expect(
      statusLine({
        tool: 'create_order',
        key: 'ik_k1k1k1k1',
        state: 'unknown',
        attempts: 3,
        failure: { kind: 'transport', message: 'HTTP 503' },
      }),
    ).toBe('create_order ik_k1k1k1k1 : unknown, no answer (HTTP 503); call again later, the key is kept [3 attempts]');
    expect(
      statusLine({
        tool: 'create_order',
        key: 'ik_k1k1k1k1',
        state: 'failed',
        attempts: 1,
        failure: { kind: 'deterministic', message: 'HTTP 401' },
      }),
    ).toBe('create_order ik_k1k1k1k1 : failed, HTTP 401; not retried');
    // A re-plan of an intent that already succeeded, whose answer got lost this time: what was known stays known.
    expect(
      statusLine({
        tool: 'create_order',
        key: 'ik_k1k1k1k1',
        state: 'succeeded',
        attempts: 1,
        failure: { kind: 'transport', message: 'HTTP 503' },
      }),
    ).toBe('create_order ik_k1k1k1k1 : no answer (HTTP 503); it succeeded earlier: call again later for its result');
    // No operation id could be obtained: nothing was sent.
    expect(
      statusLine({ tool: 'request_payment', key: '', state: 'failed', attempts: 2, failure: { kind: 'transport', message: 'HTTP 503' } }),
    ).toBe('request_payment (no key) : not sent (HTTP 503); call again later [2 attempts]');
  });

  it('shows keys by kind and tail only, and keeps short ones whole', () => {
    expect(keyHint('ik_abcdefghijklmnopqrstuvwx')).toBe('ik_…stuvwx');
    expect(keyHint('op_tpfgsb.ul0000000000000000000000.vOVkjE')).toBe('op_…vOVkjE');
    expect(keyHint('key-0001')).toBe('key-0001');
  });

  it('shortens long ids and keeps short ones', () => {
    expect(shortId('ord_123')).toBe('ord_123');
    expect(shortId('ik_abcdefghijklmnopqrstuvwx')).toBe('ik_abcdefghi…stuvwx');
  });
});
