import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { parseRetryAfter } from '../../client/retry';
import { ErrorCode, TerminalToolError, TransientToolError, UncertainToolError } from '../../lambdas/core/errors';
import type { ReconcileFinding } from '../../lambdas/core/reconcile';
import { boundedSignal } from '../../reference/downstream/http';
import { deferred } from './engine';

/**
 * The fixture tools' downstream (test/support/fixture-tools.ts): a small real HTTP server on 127.0.0.1 in the test's
 * process that books effects by key and fails as real providers do. Apart from the tools, so a test that needs only
 * a downstream does not load the local stack.
 */

/** What the downstream does to the next calls (each takes one), as real providers fail. */
export type FixtureFaultMode =
  /** The effect is booked; the answer comes after the caller's timeout. */
  | 'commit-then-timeout'
  /** HTTP 500 before booking: the caller cannot tell whether it happened. */
  | 'fail-before-commit'
  /** HTTP 503 with Retry-After, nothing booked: the caller knows nothing happened. */
  | 'unavailable'
  /** A provider without deduplication that keeps processing what it received: booked `delayMs` after it arrived, even after the caller hung up, and again for the same key. Acting calls only. */
  | 'late-commit';

export interface FixtureFault {
  mode: FixtureFaultMode;
  /** How many calls it applies to (default 1). */
  times?: number;
  /** commit-then-timeout: how long the answer is held; late-commit: how long after arrival it books (default: past the callers' timeout). */
  delayMs?: number;
  /** unavailable: the Retry-After it answers with, in whole seconds (default 1); the fixture tools wait at least that. */
  retryAfterSeconds?: number;
}

/** One effect the downstream holds. */
export interface Booking {
  booking_id: string;
  tenant: string;
  /** The caller's key: the tool's idempotency key (operation id), or an outbox event's id. */
  key: string;
  kind: string;
  payload: Record<string, unknown>;
}

export interface FixtureDownstream {
  url: string;
  /** The effects it holds (of one key, if given): the count a test asserts. */
  bookings(key?: string): Booking[];
  /** Requests asking it to act that reached it (of one key, if given), deduplicated or not. */
  calls(key?: string): number;
  /** Lookups by key it received (of one key, if given). */
  lookups(key?: string): number;
  arm(fault: FixtureFault): void;
  /**
   * Holds the next acting request for `key` once it arrived (counted) until `release()`; then it is handled as any
   * other. `entered` settles when it arrived: a test acts while a call is mid-flight.
   */
  hold(key: string): { entered: Promise<void>; release(): void };
  /** Sends it an acting request as any other caller would (a dead executor's request that got through): its booking. */
  send(booking: Omit<Booking, 'booking_id'>): Promise<Booking>;
  /** The armed faults and how many calls each still applies to. */
  armed(): Array<{ mode: FixtureFaultMode; remaining: number }>;
  /** Settles once every `late-commit` request that arrived so far has booked its effect: then the count is final. */
  landed(): Promise<void>;
  clear(): void;
  stop(): Promise<void>;
}

/** Above this amount a booking is refused (HTTP 422): a business rejection. */
export const FIXTURE_LIMIT_MINOR = 10_000_000;

/**
 * The fixture tools' downstream: books an effect per (tenant, key) and answers a repeat with the first booking
 * (except under `late-commit`), answers "what happened to key K", and takes the armed faults. `holdMs` is how long a
 * `commit-then-timeout` holds its answer unless the fault says (past the callers' timeout).
 */
export async function startFixtureDownstream(options: { holdMs: number }): Promise<FixtureDownstream> {
  const held: Booking[] = [];
  const acting: Array<{ tenant: string; key: string }> = [];
  const asked: Array<{ tenant: string; key: string }> = [];
  const faults: Array<FixtureFault & { remaining: number }> = [];
  const landing = new Set<Promise<Booking>>();
  const holds = new Map<string, { entered: ReturnType<typeof deferred<void>>; released: ReturnType<typeof deferred<void>> }>();
  const holdFor = (key: string) => {
    let gate = holds.get(key);
    if (!gate) holds.set(key, (gate = { entered: deferred<void>(), released: deferred<void>() }));
    return gate;
  };
  const find = (tenant: string, key: string) => held.find((b) => b.tenant === tenant && b.key === key);
  const takeFault = (act: boolean) => {
    const index = faults.findIndex((f) => act || f.mode !== 'late-commit');
    if (index < 0) return undefined;
    const fault = faults[index]!;
    if (--fault.remaining <= 0) faults.splice(index, 1);
    return fault;
  };
  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    if (res.destroyed) return;
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
  };
  /** Waits `ms` or until the caller hangs up. */
  const hold = (ms: number, req: IncomingMessage) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      req.socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
    });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fixture');
    if (req.method === 'GET' && url.pathname === '/bookings') {
      const tenant = url.searchParams.get('tenant') ?? '';
      const key = url.searchParams.get('key') ?? '';
      asked.push({ tenant, key });
      const fault = takeFault(false);
      if (fault?.mode === 'unavailable')
        return send(res, 503, { error: 'unavailable (injected fault)' }, { 'retry-after': String(fault.retryAfterSeconds ?? 1) });
      if (fault?.mode === 'fail-before-commit') return send(res, 500, { error: 'failed (injected fault)' });
      const booking = find(tenant, key);
      if (fault?.mode === 'commit-then-timeout') await hold(fault.delayMs ?? options.holdMs, req);
      return booking ? send(res, 200, booking) : send(res, 404, { error: 'no booking under this key' });
    }
    if (req.method === 'POST' && url.pathname === '/bookings') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const { tenant, key, kind, payload } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Omit<Booking, 'booking_id'>;
      acting.push({ tenant, key });
      const gate = holds.get(key);
      if (gate) {
        holds.delete(key);
        gate.entered.resolve();
        await gate.released.promise;
      }
      const fault = takeFault(true);
      if (fault?.mode === 'unavailable')
        return send(res, 503, { error: 'unavailable (injected fault)' }, { 'retry-after': String(fault.retryAfterSeconds ?? 1) });
      if (fault?.mode === 'fail-before-commit') return send(res, 500, { error: 'failed (injected fault)' });
      if (typeof payload.amount_minor === 'number' && payload.amount_minor > FIXTURE_LIMIT_MINOR)
        return send(res, 422, { error: `amounts above ${FIXTURE_LIMIT_MINOR} minor units are refused` });
      const book = (): Booking => {
        const booking: Booking = { booking_id: `bk-${randomUUID()}`, tenant, key, kind, payload };
        held.push(booking);
        return booking;
      };
      if (fault?.mode === 'late-commit') {
        // Not abortable: it books whether or not the caller is still there.
        const late = delay(fault.delayMs ?? options.holdMs).then(book);
        landing.add(late);
        try {
          return send(res, 201, await late);
        } finally {
          landing.delete(late);
        }
      }
      const booking = find(tenant, key) ?? book();
      if (fault?.mode === 'commit-then-timeout') await hold(fault.delayMs ?? options.holdMs, req);
      return send(res, 201, booking);
    }
    send(res, 404, { error: 'no such route' });
  }

  const server = createServer((req, res) => void handle(req, res).catch((err) => send(res, 500, { error: String(err) })));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const count = (list: Array<{ key: string }>, key?: string) =>
    key === undefined ? list.length : list.filter((c) => c.key === key).length;
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    bookings: (key) => held.filter((b) => key === undefined || b.key === key),
    calls: (key) => count(acting, key),
    lookups: (key) => count(asked, key),
    arm: (fault) => void faults.push({ ...fault, remaining: fault.times ?? 1 }),
    hold(key) {
      const gate = holdFor(key);
      return { entered: gate.entered.promise, release: () => gate.released.resolve() };
    },
    async send(booking) {
      const response = await fetch(`${url}/bookings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(booking),
      });
      if (response.status !== 201) throw new Error(`the fixture downstream answered ${response.status}: ${await response.text()}`);
      return (await response.json()) as Booking;
    },
    armed: () => faults.map(({ mode, remaining }) => ({ mode, remaining })),
    landed: async () => void (await Promise.all(landing)),
    clear: () => void faults.splice(0),
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The fixture tools' client of their downstream (a team's own client library, in the tests): every transport failure
 * classified by what it says of the effect, each request bounded by `timeoutMs`.
 */
export function fixtureDownstreamClient(baseUrl: string, timeoutMs: number) {
  async function request(init: { method: 'GET' | 'POST'; path: string; body?: unknown }, signal: AbortSignal) {
    const bounded = boundedSignal(signal, timeoutMs);
    try {
      const response = await fetch(`${baseUrl}${init.path}`, {
        method: init.method,
        headers: init.body === undefined ? {} : { 'content-type': 'application/json' },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: bounded.signal,
      });
      return {
        status: response.status,
        retryAfterMs: parseRetryAfter(response.headers.get('retry-after'), Date.now()),
        body: (await response.json()) as Record<string, unknown>,
      };
    } catch (err) {
      if (bounded.signal.aborted)
        throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'the fixture downstream did not answer in time', { cause: err });
      throw new UncertainToolError('DOWNSTREAM_CONNECTION_LOST', 'the connection to the fixture downstream was lost', { cause: err });
    } finally {
      bounded.settled();
    }
  }
  return {
    async book(booking: Omit<Booking, 'booking_id'>, signal: AbortSignal): Promise<Booking> {
      const { status, retryAfterMs, body } = await request({ method: 'POST', path: '/bookings', body: booking }, signal);
      if (status === 201) return body as unknown as Booking;
      if (status === 503)
        throw new TransientToolError(
          ErrorCode.TRANSIENT_FAILURE,
          'the fixture downstream is unavailable; nothing was done',
          retryAfterMs ?? 1000,
        );
      if (status >= 500)
        throw new UncertainToolError('DOWNSTREAM_ERROR', `the fixture downstream failed (HTTP ${status}); the outcome is unknown`);
      throw new TerminalToolError('DOWNSTREAM_REJECTED', `the fixture downstream refused the request: ${String(body.error)}`);
    },
    async find(tenant: string, key: string, signal: AbortSignal): Promise<ReconcileFinding> {
      const query = new URLSearchParams({ tenant, key });
      let answer: { status: number; body: Record<string, unknown> };
      try {
        answer = await request({ method: 'GET', path: `/bookings?${query}` }, signal);
      } catch (err) {
        return { kind: 'unreachable', reason: (err as Error).message };
      }
      if (answer.status === 200) return { kind: 'found', result: answer.body };
      if (answer.status === 404) return { kind: 'absent' };
      return { kind: 'unreachable', reason: `the fixture downstream answered HTTP ${answer.status}` };
    },
  };
}

export type FixtureDownstreamClient = ReturnType<typeof fixtureDownstreamClient>;

/** A lookup's finding with the booking shown as the tool's result (`view`): what a reconcile hook answers. */
export const found = (finding: ReconcileFinding, view: (b: Booking) => unknown): ReconcileFinding =>
  finding.kind === 'found' ? { kind: 'found', result: view(finding.result as Booking) } : finding;
