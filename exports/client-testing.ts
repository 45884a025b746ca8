/** `idempotent-mcp/client/testing`: a fetch that injects transport faults, to prove a client's retries in tests and demos. */
export { createFaultFetch, type Fault, type FaultFetch, type FaultRule, type RequestLogEntry } from '../client/fault-fetch';
