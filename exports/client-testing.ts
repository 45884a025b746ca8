/** `idempotent-mcp/client/testing`: a fetch that injects transport faults, to prove a client's retries in tests and demos. */
export { createFaultFetch, type FaultFetch, type FaultRule } from '../client/fault-fetch';
