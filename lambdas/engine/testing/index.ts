/**
 * `idempotent-mcp/engine/testing`: what a store adapter must pass. Runs under vitest (a peer dependency of this
 * subpath only).
 */
export { describeStoreConformance, processingRecord, type StoreConformanceOptions } from './store-conformance';
export { InMemoryIdempotencyStore } from '../in-memory-store';
