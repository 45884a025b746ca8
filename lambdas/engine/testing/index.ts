/**
 * `idempotent-mcp/engine/testing`: what a store adapter must pass, and the in-memory stores for tests. Runs under
 * vitest (a peer dependency of this subpath only).
 */
export { describeStoreConformance, processingRecord, type StoreConformanceOptions } from './store-conformance';
export { InMemoryIdempotencyStore } from '../in-memory-store';
export { InMemoryApprovalStore } from '../in-memory-approval-store';
