/**
 * `idempotent-mcp/engine/testing`: what a store adapter must pass, and the in-memory stores for tests. Runs under
 * vitest (a peer dependency of this subpath only).
 */
export { describeStoreConformance, processingRecord, type StoreConformanceOptions } from '../lambdas/engine/testing/store-conformance';
export { InMemoryIdempotencyStore } from '../lambdas/engine/in-memory-store';
export { InMemoryApprovalStore } from '../lambdas/engine/in-memory-approval-store';
