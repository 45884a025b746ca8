/**
 * `npm run chaos -- [--duration <seconds>] [--out <file>] [--dir <folder>] [--seed <n>]`: a bounded chaos run against
 * the real local stack: `npm start`'s code in a child process (on a data folder of its own), DynamoDB Local, the
 * local SQS server and the sandbox downstreams.
 *
 * Bursts of every write tool (create_order, send_email, create_ticket, request_payment with issue_operation_id) go
 * out concurrently, with repeated keys, conflicting arguments, two tenants, responses lost on the way back and
 * downstream faults (among them `late-commit`: a provider that does not deduplicate and applies a request after its
 * caller gave up on it, for payments as for the mailbox and the ticket system); meanwhile the server is killed with SIGKILL and started again on the same data, and DynamoDB
 * Local is stopped cleanly or killed with SIGKILL (the stack restarts it). Every call is retried with its key until
 * it settles; then the recorded history is checked against the sandbox ledger. Exits 1 on any violation.
 *
 * A SIGKILL of the emulator can lose its last acknowledged transactions (DynamoDB itself does not): what happens to
 * the keys in flight then is reported apart and does not fail the run.
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadDevIssuer } from '../lambdas/auth/dev-issuer';
import { environmentOf, loadAuthConfig } from '../lambdas/config';
import { ChaosCaller, TENANTS, type Answer, type Tenant } from './chaos-calls';
import { alive, ChaosStack, sleep, until } from './chaos-stack';
import { freePort } from '../lambdas/local/free-port';
import {
  checkHistory,
  RESOURCE_FIELD,
  settles,
  WRITE_TOOLS,
  type Ledger,
  type Violation,
  type WriteTool,
} from '../test/models/history-check';

const usage = 'usage: npm run chaos -- [--duration <seconds>] [--out <history.jsonl>] [--dir <state folder>] [--seed <n>]';
let values: { duration?: string; out?: string; dir?: string; seed?: string; help?: boolean };
try {
  ({ values } = parseArgs({
    options: {
      duration: { type: 'string' },
      out: { type: 'string' },
      dir: { type: 'string' },
      seed: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  console.error(`${(err as Error).message}\n${usage}`);
  process.exit(2);
}
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const durationS = Number(values.duration ?? 120);
if (!Number.isFinite(durationS) || durationS < 10 || durationS > 3600) {
  console.error(`--duration must be a number of seconds from 10 to 3600\n${usage}`);
  process.exit(2);
}
const seed = Number(values.seed ?? Date.now() % 1_000_000);
if (!Number.isInteger(seed)) {
  console.error(`--seed must be a whole number\n${usage}`);
  process.exit(2);
}

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const runId = new Date().toISOString().replace(/[-:.]/g, '').slice(0, 15);
const stateDir = resolve(values.dir ?? join(repo, '.local', 'chaos', `run-${runId}`));
const historyFile = resolve(values.out ?? join(stateDir, 'history.jsonl'));
mkdirSync(stateDir, { recursive: true });
mkdirSync(dirname(historyFile), { recursive: true });
const history = createWriteStream(historyFile);
const serverLog = createWriteStream(join(stateDir, 'server.log'), { flags: 'a' });

// ---------------------------------------------------------------------------------------------------------------
// Deterministic randomness (a seed reproduces the plan, not the timing).
let rngState = seed >>> 0 || 1;
const random = () => {
  rngState ^= rngState << 13;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5;
  return (rngState >>> 0) / 4_294_967_296;
};
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const chance = (p: number) => random() < p;
const started = Date.now();
const elapsed = () => ((Date.now() - started) / 1000).toFixed(1);
const say = (line: string) => console.log(`[${elapsed().padStart(6)} s] ${line}`);

// ---------------------------------------------------------------------------------------------------------------
// The stack (chaos-stack.ts) and the calls to it (chaos-calls.ts).
const stack = new ChaosStack({ repo, stateDir, port: await freePort(), log: serverLog });
const { baseUrl } = stack;
const caller = new ChaosCaller(baseUrl);
const { tokens } = caller;
const callTool = caller.callTool.bind(caller);

// ---------------------------------------------------------------------------------------------------------------
// Intents: one key (per tenant), one or more concurrent callers, sometimes one with other arguments.
interface Intent {
  id: number;
  tool: WriteTool;
  tenant: Tenant;
  key: string;
  /** The arguments of each caller (index 0: the intent's own; others may conflict). */
  variants: Array<Record<string, unknown>>;
  burst: number;
  /** Its calls overlapped a SIGKILL of DynamoDB Local: reported apart. */
  exposed: boolean;
  answers: Array<Answer & { variant: number; sentAt: number; answeredAt: number }>;
  settled: boolean;
}
const intents: Intent[] = [];
let lastKeyBase = 0;

function argsFor(tool: WriteTool, n: number, conflicting = false): Record<string, unknown> {
  const m = conflicting ? n + 1 : n;
  switch (tool) {
    case 'create_order':
      return { customer_id: `cust-${n % 7}`, items: [{ sku: `SKU-${n % 5}`, quantity: 1 + (m % 3) }], currency: 'EUR' };
    case 'send_email':
      return { to: `user${n % 9}@example.com`, subject: `Chaos ${m}`, body: `Message ${n}` };
    case 'create_ticket':
      return { title: `Chaos ticket ${m}`, description: `Ticket ${n}`, priority: pick(['low', 'normal', 'high', 'urgent'] as const) };
    case 'request_payment':
      // Some amounts are declined by the provider (a terminal failure the same key must keep answering).
      return { amount_minor: conflicting ? 999 + n : chance(0.1) ? 20_000_000 : 1000 + n, currency: 'EUR', payee_id: `payee-${n % 4}` };
  }
}

async function issueOperationId(tenant: Tenant, deadline: number): Promise<string | undefined> {
  while (Date.now() < deadline) {
    const sentAt = Date.now();
    const answer = await callTool(tenant, 'issue_operation_id', { tool: 'request_payment' }, false);
    const id = answer.structured?.operation_id;
    record({ kind: 'issue_operation_id', tenant, sentAt, answer: { ...answer, structured: undefined }, resource: id });
    if (typeof id === 'string') return id;
    await sleep(300);
  }
  return undefined;
}

function record(line: Record<string, unknown>) {
  history.write(`${JSON.stringify({ t: new Date().toISOString(), ...line })}\n`);
}

const stats = { calls: 0, lostResponses: 0, transportFailures: 0 };

/** Calls one caller of an intent with its key until it settles (or `deadline`). */
async function callUntilSettled(intent: Intent, variant: number, deadline: number, phase: string): Promise<void> {
  let attempt = 0;
  while (Date.now() < deadline) {
    attempt += 1;
    const lose = phase === 'burst' && chance(0.12);
    const keyField = intent.tool === 'request_payment' ? 'operation_id' : 'idempotency_key';
    const sentAt = Date.now();
    const answer = await callTool(intent.tenant, intent.tool, { ...intent.variants[variant], [keyField]: intent.key }, lose);
    const answeredAt = Date.now();
    stats.calls += 1;
    if (lose && answer.failure?.includes('ECONNRESET')) stats.lostResponses += 1;
    else if (answer.failure) stats.transportFailures += 1;
    const resource =
      answer.outcome === 'succeeded'
        ? (answer.structured?.result as Record<string, unknown> | undefined)?.[RESOURCE_FIELD[intent.tool]]
        : undefined;
    const entry = {
      ...answer,
      structured: undefined,
      resource: typeof resource === 'string' ? resource : undefined,
      variant,
      sentAt,
      answeredAt,
    };
    intent.answers.push(entry);
    record({
      kind: 'call',
      phase,
      intent: intent.id,
      burst: intent.burst,
      tool: intent.tool,
      tenant: intent.tenant,
      key: intent.key,
      variant,
      attempt,
      lost_response: lose || undefined,
      sent_at: new Date(sentAt).toISOString(),
      ms: answeredAt - sentAt,
      outcome: entry.outcome,
      retryable: entry.retryable,
      code: entry.code,
      resource: entry.resource,
      failure: entry.failure,
      message: entry.outcome === 'succeeded' ? undefined : entry.message?.slice(0, 160),
    });
    if (settles(answer)) return;
    const wait = answer.retry_after_ms ?? (answer.failure ? 300 + 200 * Math.min(attempt, 5) : 300);
    await sleep(Math.min(Math.max(wait, 100), 1_500));
  }
}

async function newIntent(
  tool: WriteTool,
  tenant: Tenant,
  burst: number,
  deadline: number,
  sharedKey?: string,
): Promise<Intent | undefined> {
  const n = ++lastKeyBase;
  const key = tool === 'request_payment' ? await issueOperationId(tenant, deadline) : (sharedKey ?? `chaos-${runId}-${n}`);
  if (!key) return undefined;
  const variants = [argsFor(tool, n)];
  if (chance(0.15)) variants.push(argsFor(tool, n, true));
  const intent: Intent = { id: intents.length, tool, tenant, key, variants, burst, exposed: false, answers: [], settled: false };
  intents.push(intent);
  return intent;
}

// ---------------------------------------------------------------------------------------------------------------
// Chaos: what happens during each burst, in turn.
type Action = 'none' | 'kill-server' | 'stop-dynamodb' | 'kill-dynamodb';
// The first burst runs undisturbed: later bursts replay its settled keys while the server or the store is down.
const ACTIONS: readonly Action[] = [
  'none',
  'stop-dynamodb',
  'kill-server',
  'kill-dynamodb',
  'stop-dynamodb',
  'kill-server',
  'none',
  'kill-server',
];
const actionCounts: Record<Action, number> = { none: 0, 'kill-server': 0, 'stop-dynamodb': 0, 'kill-dynamodb': 0 };

const violations: Violation[] = [];

async function armDownstreamFaults() {
  const faults: Array<Record<string, unknown>> = [];
  const targets = ['payments', 'tickets', 'mailbox'] as const;
  // In every burst one downstream does not deduplicate and applies requests after their caller gave up on them
  // (late-commit; the server's downstream timeout is 1 s), within the run's shortest in-flight window (the
  // consumer's: its 3 s lease plus 1 s, counted from when it stopped waiting).
  const late = pick(targets);
  for (const target of targets) {
    if (target === late) {
      faults.push({ target, mode: 'late-commit', times: 1 + Math.floor(random() * 3), delay_ms: 1200 + Math.floor(random() * 2500) });
      continue;
    }
    if (!chance(0.5)) continue;
    const mode = pick(['commit-then-timeout', 'fail-before-commit', 'unavailable', 'slow', 'late-commit'] as const);
    const delay = mode === 'late-commit' ? { delay_ms: 1200 + Math.floor(random() * 2500) } : {};
    faults.push({ target, mode, times: 1 + Math.floor(random() * 3), ...delay });
  }
  if (chance(0.3)) faults.push({ target: 'queue', mode: 'duplicate-delivery', times: 1 + Math.floor(random() * 2) });
  for (const fault of faults) {
    await fetch(`${baseUrl}/sandbox/faults`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(fault),
    }).catch(() => {});
  }
  record({ kind: 'faults', faults });
  return faults.length;
}

async function act(action: Action, burst: number): Promise<void> {
  actionCounts[action] += 1;
  if (action === 'none') return;
  const java = stack.emulatorPid();
  record({ kind: 'action', action, burst, emulator_pid: java });
  if (action === 'kill-server') {
    say(`burst ${burst}: SIGKILL of the server (pid ${stack.pid})`);
    await stack.kill();
    // Defect 8: the emulator must not outlive the stack that started it.
    if (!(await until(() => !alive(java), 30_000))) {
      violations.push({
        kind: 'emulator outlived its server',
        detail: `DynamoDB Local pid ${java} still runs 30 s after the server's SIGKILL`,
        exposed: false,
      });
    }
    if (!(await stack.start()))
      violations.push({ kind: 'stack did not recover', detail: 'the server did not become healthy after a restart', exposed: false });
    else say(`burst ${burst}: server restarted (pid ${stack.pid})`);
    return;
  }
  const signal = action === 'stop-dynamodb' ? 'SIGTERM' : 'SIGKILL';
  say(`burst ${burst}: ${signal} of DynamoDB Local (pid ${java})`);
  if (action === 'kill-dynamodb') for (const intent of intents) if (!intent.settled || intent.burst === burst) intent.exposed = true;
  if (java) process.kill(java, signal);
  // Defect 3: the stack restarts the emulator on the same data; /health says when the store answers again.
  const back = await until(async () => stack.emulatorPid() !== java && (await stack.healthy()), 60_000);
  if (!back)
    violations.push({
      kind: 'stack did not recover',
      detail: `the store was not reachable 60 s after the emulator's ${signal}`,
      exposed: false,
    });
  else say(`burst ${burst}: DynamoDB Local is back (pid ${stack.emulatorPid()})`);
}

// ---------------------------------------------------------------------------------------------------------------
// The run.
async function main(): Promise<number> {
  say(`chaos run ${runId}, seed ${seed}, ${durationS} s; state in ${stateDir}`);
  if (!(await stack.start())) {
    console.error(`the server did not start; see ${join(stateDir, 'server.log')}`);
    return 2;
  }
  const auth = loadAuthConfig(environmentOf({ authMode: 'dev', devAuthDir: join(stateDir, '.local', 'auth') }));
  if (auth.mode !== 'dev') throw new Error('unreachable: dev auth requested');
  const issuer = await loadDevIssuer({ dir: auth.devAuthDir, issuer: auth.issuer, audience: auth.audience, tenantClaim: auth.tenantClaim });
  for (const tenant of TENANTS) tokens[tenant] = await issuer.sign({ tenant, ttlSeconds: 6 * 3600 });

  const runUntil = started + durationS * 1000;
  let burst = 0;
  while (Date.now() < runUntil) {
    burst += 1;
    const action = ACTIONS[(burst - 1) % ACTIONS.length]!;
    const faults = await armDownstreamFaults();
    const burstDeadline = Date.now() + 60_000;
    const calls: Array<Promise<void>> = [];
    const fresh: Intent[] = [];
    const size = 10 + Math.floor(random() * 8);
    for (let i = 0; i < size; i++) {
      const tool = pick(WRITE_TOOLS);
      const tenant = pick(TENANTS);
      const intent = await newIntent(tool, tenant, burst, burstDeadline);
      if (!intent) continue;
      fresh.push(intent);
      // The same client key in the other tenant: a different intent, its own effect.
      if (tool !== 'request_payment' && chance(0.2)) {
        const twin = await newIntent(tool, tenant === 'chaos-a' ? 'chaos-b' : 'chaos-a', burst, burstDeadline, intent.key);
        if (twin) fresh.push(twin);
      }
    }
    // Settled intents of earlier bursts, asked again (their answers must not change, even while the store is down).
    const replays = intents
      .filter((i) => i.settled && i.burst < burst)
      .sort(() => random() - 0.5)
      .slice(0, 6);
    say(`burst ${burst}: ${fresh.length} intents, ${replays.length} replays, ${faults} downstream faults, action ${action}`);
    for (const intent of fresh) {
      const callers = 1 + Math.floor(random() * 3);
      for (let c = 0; c < callers; c++)
        calls.push(callUntilSettled(intent, c === 1 && intent.variants.length > 1 ? 1 : 0, burstDeadline, 'burst'));
      if (callers === 1 && intent.variants.length > 1) calls.push(callUntilSettled(intent, 1, burstDeadline, 'burst'));
    }
    for (const intent of replays) calls.push(callUntilSettled(intent, 0, burstDeadline, 'replay'));
    const chaos = sleep(100 + random() * 700).then(() => act(action, burst));
    await Promise.all([...calls, chaos]);
    for (const intent of fresh) intent.settled = intent.answers.some((a) => settles(a) && a.variant === 0);
  }

  // Settle: everything not settled yet is asked again until the reconciler has had time.
  const open = intents.filter((i) => !i.settled);
  say(`settling ${open.length} open intents`);
  const settling = Date.now();
  const settleDeadline = Date.now() + 90_000;
  await Promise.all(open.map((intent) => callUntilSettled(intent, 0, settleDeadline, 'settle')));
  for (const intent of open) intent.settled = intent.answers.some((a) => settles(a) && a.variant === 0);

  // Queued effects: wait (bounded) for the consumer to deliver every succeeded email and ticket (not those of keys
  // exposed to an emulator SIGKILL: a lost transaction's event never comes).
  const queued = () =>
    intents.flatMap((i) =>
      !i.exposed && (i.tool === 'send_email' || i.tool === 'create_ticket')
        ? i.answers.filter((a) => a.resource).map((a) => a.resource!)
        : [],
    );
  let ledger = await readLedger();
  await until(async () => {
    ledger = await readLedger();
    const delivered = new Set([...ledger.emails, ...ledger.tickets].map((e) => e.event_id));
    return queued().every((id) => delivered.has(id));
  }, 90_000);

  say(`settled and delivered in ${((Date.now() - settling) / 1000).toFixed(1)} s; a last replay of every intent`);
  // A last replay of every intent: the answer must be the settled one.
  await Promise.all(intents.map((intent) => callUntilSettled(intent, 0, Date.now() + 30_000, 'final')));
  ledger = await readLedger();
  check(ledger);
  await stack.stop();
  if (alive(stack.emulatorPid()))
    violations.push({ kind: 'emulator outlived its server', detail: 'DynamoDB Local still runs after a clean stop', exposed: false });
  return report();
}

async function readLedger(): Promise<Ledger> {
  for (;;) {
    try {
      const response = await fetch(`${baseUrl}/sandbox/ledger`, { signal: AbortSignal.timeout(10_000) });
      if (response.ok) return (await response.json()) as Ledger;
    } catch {
      // the server or the store is coming back
    }
    await sleep(500);
  }
}

/** The invariants (test/models/history-check.ts) on what was answered and what the downstreams recorded; both go into the history. */
function check(ledger: Ledger) {
  for (const intent of intents)
    record({ kind: 'intent', id: intent.id, tool: intent.tool, tenant: intent.tenant, key: intent.key, exposed: intent.exposed });
  record({ kind: 'ledger', ledger });
  violations.push(...checkHistory({ intents, ledger }));
}

function report(): number {
  const rows = WRITE_TOOLS.map((tool) => {
    const mine = intents.filter((i) => i.tool === tool);
    const answers = mine.flatMap((i) => i.answers);
    const count = (f: (a: Answer) => boolean) => answers.filter(f).length;
    return {
      tool,
      intents: mine.length,
      calls: answers.length,
      succeeded: count((a) => a.outcome === 'succeeded'),
      failed: count((a) => a.outcome === 'failed' && a.retryable === false),
      'failed, retry': count((a) => a.outcome === 'failed' && a.retryable === true),
      conflict: count((a) => a.outcome === 'conflict'),
      'in progress': count((a) => a.outcome === 'in_progress'),
      unknown: count((a) => a.outcome === 'unknown'),
      'no answer': count((a) => a.failure !== undefined),
    };
  });
  console.log('\nCalls by tool and answer');
  console.table(rows);
  console.log(
    `Chaos: ${actionCounts['kill-server']} server SIGKILLs, ${actionCounts['stop-dynamodb']} clean stops and ${actionCounts['kill-dynamodb']} SIGKILLs of DynamoDB Local, ${stats.lostResponses} lost responses`,
  );
  const counted = violations.filter((v) => !v.exposed);
  const apart = violations.filter((v) => v.exposed);
  const table = (list: Violation[]) => {
    const byKind = new Map<string, number>();
    for (const v of list) byKind.set(v.kind, (byKind.get(v.kind) ?? 0) + 1);
    console.table([...byKind].map(([kind, count]) => ({ kind, count })));
    for (const v of list.slice(0, 20)) console.log(`  - ${v.kind}: ${v.detail}`);
    if (list.length > 20) console.log(`  ... and ${list.length - 20} more (see the history)`);
  };
  if (apart.length) {
    console.log(
      '\nAfter a SIGKILL of DynamoDB Local (the emulator can lose its last acknowledged transactions; DynamoDB does not): not counted',
    );
    table(apart);
  }
  for (const v of violations) record({ ...v, violation: v.kind, kind: 'violation' });
  console.log(`\nHistory (one JSON line per call): ${historyFile}; the run took ${elapsed()} s.`);
  if (counted.length) {
    console.log(`\n${counted.length} VIOLATION(S)`);
    table(counted);
    return 1;
  }
  console.log(`\nNo violation: ${intents.length} intents, ${stats.calls} calls.`);
  return 0;
}

let exitCode = 1;
try {
  exitCode = await main();
} catch (err) {
  console.error(`chaos run failed: ${(err as Error).stack ?? err}`);
  await stack.kill();
} finally {
  await new Promise<void>((r) => history.end(() => r()));
}
process.exit(exitCode);
