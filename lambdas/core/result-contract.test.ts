import { describe, expect, it } from 'vitest';
import { describeResult, isErrorResult, parseReadError, readErrorText, WriteResults, type WriteToolResult } from './result-contract';

const KEY = 'key-00000001';
const FIRST = { firstExecutedAt: Date.UTC(2030, 0, 1, 12) };

describe('WriteResults builders', () => {
  it('succeeded: a first execution, and a replay with the first execution time', () => {
    expect(WriteResults.succeeded(KEY, { id: 1 })).toEqual({
      outcome: 'succeeded',
      replayed: false,
      retryable: false,
      idempotency_key: KEY,
      result: { id: 1 },
    });
    expect(WriteResults.succeeded(KEY, { id: 1 }, FIRST)).toEqual({
      outcome: 'succeeded',
      replayed: true,
      retryable: false,
      idempotency_key: KEY,
      result: { id: 1 },
      first_executed_at: '2030-01-01T12:00:00.000Z',
    });
  });

  it('failed (terminal): not retryable, replayable', () => {
    const error = { code: 'CARD_DECLINED', message: 'declined' };
    expect(WriteResults.failed(KEY, error)).toEqual({ outcome: 'failed', replayed: false, retryable: false, idempotency_key: KEY, error });
    expect(WriteResults.failed(KEY, error, FIRST)).toMatchObject({ replayed: true, first_executed_at: '2030-01-01T12:00:00.000Z' });
  });

  it('transient failure: retryable with the same key after retry_after_ms', () => {
    const error = { code: 'TRANSIENT_FAILURE', message: 'busy' };
    expect(WriteResults.transientFailure(KEY, error, 750)).toEqual({
      outcome: 'failed',
      replayed: false,
      retryable: true,
      retry_after_ms: 750,
      idempotency_key: KEY,
      error,
    });
  });

  it('in progress, unknown, conflict, review required, rejected carry their codes', () => {
    expect(WriteResults.inProgress(KEY, 500)).toMatchObject({
      outcome: 'in_progress',
      retryable: true,
      retry_after_ms: 500,
      error: { code: 'OPERATION_IN_PROGRESS' },
    });
    expect(WriteResults.unknown(KEY, 5000)).toMatchObject({
      outcome: 'unknown',
      retryable: true,
      retry_after_ms: 5000,
      error: { code: 'OUTCOME_UNKNOWN' },
    });
    expect(WriteResults.unknown(KEY, 5000, 'custom').error!.message).toBe('custom');
    expect(WriteResults.conflict(KEY)).toMatchObject({ outcome: 'conflict', retryable: false, error: { code: 'IDEMPOTENCY_KEY_REUSED' } });
    expect(WriteResults.reviewRequired(KEY)).toMatchObject({ outcome: 'failed', retryable: false, error: { code: 'REVIEW_REQUIRED' } });
    // A parked call may have landed: its answer never says it did not, and never reads as "use a new key".
    const parked = describeResult(WriteResults.reviewRequired(KEY));
    expect(parked).toMatch(/may already have taken effect/);
    expect(parked).toMatch(/do not send it again under a new key/);
    expect(parked).not.toMatch(/nothing was run/i);
    expect(WriteResults.rejected(KEY, { code: 'INVALID_ARGUMENTS', message: 'items is required' })).toEqual({
      outcome: 'rejected',
      replayed: false,
      retryable: false,
      idempotency_key: KEY,
      error: { code: 'INVALID_ARGUMENTS', message: 'items is required.' },
    });
  });

  it('never marks anything but a success or a terminal failure as a replay', () => {
    const others = [
      WriteResults.transientFailure(KEY, { code: 'X', message: 'x' }, 1),
      WriteResults.inProgress(KEY, 1),
      WriteResults.unknown(KEY, 1),
      WriteResults.conflict(KEY),
      WriteResults.reviewRequired(KEY),
      WriteResults.rejected(KEY, { code: 'X', message: 'x' }),
    ];
    for (const r of others) {
      expect(r.replayed).toBe(false);
      expect(r.first_executed_at).toBeUndefined();
      expect(r.result).toBeUndefined();
    }
  });
});

describe('describeResult and isErrorResult', () => {
  const cases: [WriteToolResult, RegExp][] = [
    [WriteResults.succeeded(KEY, 1), /^Succeeded\.$/],
    [WriteResults.succeeded(KEY, 1, FIRST), /replayed result of the first call at 2030-01-01T12:00:00\.000Z.*nothing was executed again/],
    [WriteResults.failed(KEY, { code: 'CARD_DECLINED', message: 'declined' }), /^Failed \(CARD_DECLINED\): declined\. Do not retry/],
    [
      WriteResults.transientFailure(KEY, { code: 'TRANSIENT_FAILURE', message: 'busy' }, 750),
      /Retry with the same idempotency_key after 750 ms/,
    ],
    [WriteResults.inProgress(KEY, 400), /^In progress.*Retry with the same idempotency_key after 400 ms/],
    [WriteResults.unknown(KEY, 5000), /^Outcome unknown.*after 5000 ms.*Do not use a new key/],
    [WriteResults.conflict(KEY), /^Conflict \(IDEMPOTENCY_KEY_REUSED\)/],
    [WriteResults.reviewRequired(KEY), /REVIEW_REQUIRED.*Do not retry/],
    [
      WriteResults.rejected(KEY, { code: 'INVALID_IDEMPOTENCY_KEY', message: 'too short' }),
      /^Rejected \(INVALID_IDEMPOTENCY_KEY\): too short\. Fix the call/,
    ],
  ];

  it.each(cases)('%j reads as %s', (result, sentence) => {
    expect(describeResult(result)).toMatch(sentence);
  });

  it('isError is true for every outcome but succeeded', () => {
    for (const [result] of cases) expect(isErrorResult(result)).toBe(result.outcome !== 'succeeded');
  });
});

describe('read tool errors', () => {
  it('carry their code in the text, and say whether calling again may help', () => {
    expect(parseReadError(readErrorText('TRANSIENT_FAILURE', 'the key is unavailable: try again'))).toEqual({
      code: 'TRANSIENT_FAILURE',
      retryable: true,
    });
    expect(parseReadError(readErrorText('STORE_UNAVAILABLE', 'x'))).toEqual({ code: 'STORE_UNAVAILABLE', retryable: true });
    expect(parseReadError(readErrorText('NOT_FOUND', 'no such order'))).toEqual({ code: 'NOT_FOUND', retryable: false });
    expect(parseReadError(readErrorText('INVALID_ARGUMENTS', 'tool: required'))).toEqual({ code: 'INVALID_ARGUMENTS', retryable: false });
    expect(parseReadError('Order ord_1 not found')).toBeUndefined();
  });
});
