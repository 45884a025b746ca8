import { describe } from 'vitest';
import { suiteContext, type StoreConformanceOptions } from './store-conformance-fixtures';
import { describeQueries } from './store-conformance-queries';
import { describeTransitions } from './store-conformance-transitions';
import { describeWrites } from './store-conformance-writes';

export { processingRecord, type StoreConformanceOptions } from './store-conformance-fixtures';

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
