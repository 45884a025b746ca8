import { describe, expect, it } from 'vitest';
import { checkHistory, Invariant, readHistory, type HistoryAnswer, type HistoryIntent, type Ledger } from './history-check';

const T0 = Date.parse('2026-12-04T08:00:00Z');
const answer = (a: Partial<HistoryAnswer> & { at: number }): HistoryAnswer => ({
  variant: 0,
  sentAt: T0 + a.at,
  answeredAt: T0 + a.at + 10,
  ...a,
});
const order = (answers: HistoryAnswer[]): HistoryIntent => ({
  id: 0,
  tool: 'create_order',
  tenant: 'chaos-a',
  key: 'k1',
  exposed: false,
  answers,
});
const emptyLedger = (): Ledger => ({ orders: [], payments: [], tickets: [], emails: [] });
const effect = (id: string, at = 5) => ({
  tenant: 'chaos-a',
  idempotency_key: 'k1',
  order_id: id,
  created_at: new Date(T0 + at).toISOString(),
});

/** A history that keeps every invariant: a lost response, a retry, a replay. */
function clean() {
  const ledger = emptyLedger();
  ledger.orders.push(effect('o-1'));
  const intents = [
    order([
      answer({ at: 0, failure: 'transport: ECONNRESET' }),
      answer({ at: 100, outcome: 'succeeded', resource: 'o-1' }),
      answer({ at: 200, outcome: 'succeeded', resource: 'o-1' }),
    ]),
  ];
  return { intents, ledger };
}
const kinds = (h: ReturnType<typeof clean>) => checkHistory(h).map((v) => v.kind);

describe('the chaos history checker', () => {
  it('passes a history that keeps every invariant', () => {
    expect(checkHistory(clean())).toEqual([]);
  });

  it('catches a second effect for one key', () => {
    const h = clean();
    h.ledger.orders.push(effect('o-2', 150));
    expect(kinds(h)).toContain(Invariant.oneEffect);
  });

  it('catches succeeded answers that name different resources', () => {
    const h = clean();
    h.intents[0]!.answers.push(answer({ at: 300, outcome: 'succeeded', resource: 'o-9' }));
    expect(kinds(h)).toEqual(expect.arrayContaining([Invariant.sameResult, Invariant.effectExists]));
  });

  it('catches a succeeded answer without its effect', () => {
    const h = clean();
    h.ledger.orders = [];
    expect(kinds(h)).toEqual([Invariant.effectExists]);
  });

  it('catches succeeded answers to callers with different arguments', () => {
    const h = clean();
    h.intents[0]!.answers.push(answer({ at: 300, outcome: 'succeeded', resource: 'o-1', variant: 1 }));
    expect(kinds(h)).toEqual([Invariant.ownArguments]);
  });

  it('catches an intent left unsettled', () => {
    const h = clean();
    h.intents[0]!.answers.push(answer({ at: 300, outcome: 'unknown', retryable: true }));
    expect(kinds(h)).toEqual([Invariant.settled]);
  });

  it('catches "failed, nothing ran" once the effect exists', () => {
    const h = clean();
    h.intents[0]!.answers.splice(
      2,
      0,
      answer({ at: 150, outcome: 'failed', retryable: true, code: 'TRANSIENT_FAILURE', message: 'nothing was executed' }),
    );
    expect(kinds(h)).toEqual([Invariant.noFalseNothingRan]);
  });

  it('catches "failed" given after the request that made the effect reached the downstream, though it took effect later', () => {
    // The issue-30 history: the first call's request reaches a provider that applies it 2 s later; meanwhile the key
    // was released and a retry is told "failed, nothing ran" (the provider was busy), then one is told "refused".
    const payments = (answers: HistoryAnswer[]): HistoryIntent => ({
      id: 0,
      tool: 'request_payment',
      tenant: 'chaos-a',
      key: 'op-1',
      exposed: false,
      answers,
    });
    const ledger = emptyLedger();
    const late = {
      tenant: 'chaos-a',
      idempotency_key: 'op-1',
      payment_id: 'pay-1',
      received_at: new Date(T0 + 5).toISOString(),
      created_at: new Date(T0 + 2000).toISOString(),
    };
    ledger.payments.push(late);
    const retryable = answer({ at: 1500, outcome: 'failed', retryable: true, code: 'DOWNSTREAM_BUSY', message: 'nothing ran' });
    const history = {
      intents: [
        payments([
          answer({ at: 0, outcome: 'unknown', retryable: true }),
          retryable,
          answer({ at: 3000, outcome: 'succeeded', resource: 'pay-1' }),
        ]),
      ],
      ledger,
    };
    expect(kinds(history)).toEqual([Invariant.noFalseNothingRan]);
    history.intents[0]!.answers[1] = answer({ at: 1500, outcome: 'failed', retryable: false, code: 'PAYMENT_FAILED', message: 'refused' });
    expect(kinds(history)).toEqual([Invariant.noFalseNothingRan]);
    // Without the request's arrival only the effect's time counts: the same answers pass, as they did before.
    delete (late as { received_at?: string }).received_at;
    expect(kinds(history)).toEqual([]);
    // A failure before the request reached the downstream is true: nothing had run yet.
    history.intents[0]!.answers = [
      answer({ at: 0, outcome: 'failed', retryable: true, code: 'DOWNSTREAM_UNAVAILABLE' }),
      answer({ at: 3000, outcome: 'succeeded', resource: 'pay-1' }),
    ];
    late.received_at = new Date(T0 + 1000).toISOString();
    expect(kinds(history)).toEqual([]);
  });

  it('catches a queued event that took effect twice, and one no answer names', () => {
    const ledger = emptyLedger();
    ledger.emails.push(
      { tenant: 'chaos-a', event_id: 'e-1' },
      { tenant: 'chaos-a', event_id: 'e-1' },
      { tenant: 'chaos-b', event_id: 'e-2' },
    );
    const intents: HistoryIntent[] = [
      {
        id: 0,
        tool: 'send_email',
        tenant: 'chaos-a',
        key: 'k',
        exposed: false,
        answers: [answer({ at: 0, outcome: 'succeeded', resource: 'e-1' })],
      },
    ];
    expect(checkHistory({ intents, ledger }).map((v) => v.kind)).toEqual(
      expect.arrayContaining([Invariant.eventOnce, Invariant.effectAnswered]),
    );
  });

  it('reports violations of intents exposed to an emulator SIGKILL apart', () => {
    const h = clean();
    h.ledger.orders.push(effect('o-2', 150));
    h.intents[0]!.exposed = true;
    expect(checkHistory(h).every((v) => v.exposed)).toBe(true);
  });

  it('reads a history.jsonl back: calls, intents and the ledger line the chaos run writes', () => {
    const ledger = emptyLedger();
    ledger.orders.push(effect('o-1'), effect('o-2', 50));
    const lines = [
      {
        kind: 'call',
        intent: 0,
        tool: 'create_order',
        tenant: 'chaos-a',
        key: 'k1',
        variant: 0,
        sent_at: new Date(T0).toISOString(),
        ms: 12,
        outcome: 'succeeded',
        resource: 'o-1',
      },
      { kind: 'faults', faults: [] },
      { kind: 'intent', id: 0, tool: 'create_order', tenant: 'chaos-a', key: 'k1', exposed: false },
      { kind: 'ledger', ledger },
    ];
    const history = readHistory(lines.map((l) => JSON.stringify(l)).join('\n'));
    expect(history.intents).toHaveLength(1);
    expect(history.intents[0]!.answers[0]!.answeredAt).toBe(T0 + 12);
    expect(checkHistory(history).map((v) => v.kind)).toEqual([Invariant.oneEffect]);
    expect(() => readHistory(JSON.stringify(lines[0]))).toThrow(/no ledger line/);
  });
});
