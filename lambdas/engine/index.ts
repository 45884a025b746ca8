/**
 * `idempotent-mcp/engine`: the pure core (key rules, fingerprint, transitions, expiry, classification, the result
 * contract), the engine, the store port (no AWS types) and an in-memory store. Nothing here does I/O of its own.
 */
export * from '../core/approval';
export * from '../core/clock';
export * from '../core/display-text';
export * from '../core/money';
export * from '../core/errors';
export * from '../core/fingerprint';
export * from '../core/idempotency-key';
export * from '../core/keys';
export * from '../core/lease';
export * from '../core/operation-id';
export * from '../core/reconcile';
export * from '../core/result-contract';
export * from '../core/state-machine';
export * from './approval-store';
export * from './engine';
export * from './observer';
export * from './persistence';
export { InMemoryIdempotencyStore } from './in-memory-store';
