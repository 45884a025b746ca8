import type { TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import type { IdempotencyRecord, RecordStatus, StoredError } from '../core/state-machine';

export interface RecordIdentity {
  tenant: string;
  tool: string;
  idempotencyKey: string;
}

/** A tool's own write (business item, outbox event) committed atomically with its SUCCEEDED record. */
export type ExtraWrite = NonNullable<TransactWriteCommandInput['TransactItems']>[number];

export type ClaimResult = { claimed: true } | { claimed: false; existing: IdempotencyRecord };

export interface Settlement {
  status: Extract<RecordStatus, 'SUCCEEDED' | 'FAILED'>;
  result?: unknown;
  error?: StoredError;
  errorType?: IdempotencyRecord['errorType'];
}

/**
 * The persistence port of the engine: each method is one conditional write (or read), so the state machine's
 * guarantees hold however many executors race. Errors: `OwnershipLostError` when a fenced write finds the record
 * is no longer ours; `TransactionRejectedError` when the tool's own writes were refused (nothing committed);
 * `StoreUnavailableError` when the write may or may not have been applied.
 */
export interface IdempotencyStore {
  /** Creates the PROCESSING record unless a live one exists; on failure returns the existing record. */
  claim(record: IdempotencyRecord, now: number): Promise<ClaimResult>;
  /** Strongly consistent read. */
  get(identity: RecordIdentity): Promise<IdempotencyRecord | undefined>;
  /** PROCESSING (owned by `ownerToken`) to SUCCEEDED/FAILED, with the tool's writes in the same transaction. */
  settle(identity: RecordIdentity, ownerToken: string, settlement: Settlement, now: number, writes?: ExtraWrite[]): Promise<void>;
  /** Deletes the PROCESSING record we own: nothing happened and a retry with the key must execute. */
  release(identity: RecordIdentity, ownerToken: string): Promise<boolean>;
  /** PROCESSING (owned by `ownerToken`) to UNKNOWN, queued for the reconciler at `nextCheckAt`. */
  markUnknown(
    identity: RecordIdentity,
    ownerToken: string,
    details: { error: StoredError; errorType: IdempotencyRecord['errorType']; nextCheckAt: number },
    now: number,
  ): Promise<boolean>;
  /** A stale PROCESSING record gets a new owner and lease; false when someone else moved first. */
  takeOver(
    identity: RecordIdentity,
    expectedOwnerToken: string,
    newOwnerToken: string,
    leaseExpiresAt: number,
    now: number,
  ): Promise<boolean>;
}
