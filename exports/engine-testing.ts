/**
 * `idempotent-mcp/engine/testing`: what a store adapter must pass (the in-memory stores it is run on are
 * `idempotent-mcp/engine`'s): the idempotency store's suite and the approval store's. Runs under vitest (a peer
 * dependency of this subpath only).
 */
export { describeStoreConformance, type StoreConformanceOptions } from '../lambdas/engine/testing/store-conformance';
export { describeApprovalStoreConformance } from '../lambdas/confirmation/testing/approval-store-conformance';
