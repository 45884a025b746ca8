import type { RecordIdentity, RecordMemos } from 'idempotent-mcp/engine';
import type { PreparedLookup } from './lookup';

/**
 * The lookup of one call (its templates filled from the call's arguments), written before the call is sent and read
 * by the reconciler when the answer was lost: the idempotency record keeps a fingerprint of the arguments, not the
 * arguments, and the upstream knows nothing of our key.
 */
export interface LookupMemo {
  /** `null`: the call cannot be checked (its arguments lack what a template names): a person decides. */
  put(identity: RecordIdentity, lookup: PreparedLookup | null, expiresAtSeconds: number): Promise<void>;
  /** undefined: no memo, so the call was never sent (the memo is written first). */
  get(identity: RecordIdentity): Promise<PreparedLookup | null | undefined>;
}

/** The memo's name beside the record. */
const MEMO = 'gateway-lookup';

/** The lookup memo on the store's record memos (the DynamoDB table when deployed). */
export class RecordLookupMemo implements LookupMemo {
  constructor(private readonly memos: RecordMemos) {}

  put(identity: RecordIdentity, lookup: PreparedLookup | null, expiresAtSeconds: number): Promise<void> {
    return this.memos.put(identity, MEMO, lookup, expiresAtSeconds);
  }

  async get(identity: RecordIdentity): Promise<PreparedLookup | null | undefined> {
    return (await this.memos.get(identity, MEMO)) as PreparedLookup | null | undefined;
  }
}
