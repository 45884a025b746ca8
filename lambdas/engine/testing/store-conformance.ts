import { describe } from 'vitest';
import type { IdempotencyStore } from '../persistence';
import { suiteContext } from './store-conformance-fixtures';
import { describeQueries } from './store-conformance-queries';
import { describeTransitions } from './store-conformance-transitions';
import { describeWrites } from './store-conformance-writes';

/** @public */
export interface StoreConformanceOptions {
  /** The store under test; called once per test. Records of different tests never share a key. */
  store: () => IdempotencyStore | Promise<IdempotencyStore>;
  /** The store also implements ReviewStore (the review workflow): its decisions are held to the table too. */
  reviewStore?: boolean;
  /**
   * The store also implements RecordQueries (the reconciler's and the review desk's): its answers are held to the
   * records it holds. The suite's records may share the store with other tests' (one table): the queries are checked
   * on records due before any other's.
   */
  queries?: boolean;
  /**
   * Another store on the same table that is someone else's (another `keyPrefix`: another gateway's upstream, another
   * endpoint): the suite checks that the two never read, count or settle each other's records, and that the same
   * tenant, tool and key in both are two records. Called once per test, after `store`.
   */
  neighbour?: () => IdempotencyStore | Promise<IdempotencyStore>;
}

export { processingRecord } from './store-conformance-fixtures';

/**
 * What every adapter of the store port must do, as a vitest suite: call it at the top level of a test file with a
 * factory of your store. Each write is one transition of the state machine, fenced so that racing executors and
 * reconcilers never both win. The in-memory store and the DynamoDB adapter both pass it.
 * @public
 */
export function describeStoreConformance(name: string, options: StoreConformanceOptions): void {
  const context = suiteContext(options);
  describe(`${name}: the idempotency store contract`, () => {
    describeWrites(context);
    describeTransitions(context);
    describeQueries(context);
  });
}
