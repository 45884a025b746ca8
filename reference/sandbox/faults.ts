import * as z from 'zod';

/**
 * Faults the sandbox injects on the next calls to a downstream (POST /sandbox/faults), so every failure the
 * promise must survive can be produced on demand, across processes (the armed faults live in DynamoDB).
 *
 * - `commit-then-timeout`: the effect commits, the answer arrives after the caller's timeout.
 * - `fail-before-commit`: the downstream fails with HTTP 500 before committing (the caller cannot tell which).
 * - `unavailable`: HTTP 503 with Retry-After, nothing done (the caller knows nothing happened).
 * - `slow`: the downstream waits `delay_ms` before handling the call; a caller that hung up by then gets nothing done.
 * - `late-commit`: a provider without deduplication that keeps processing what it received: the call is applied
 *   `delay_ms` after it arrived whether or not the caller is still connected, and not deduplicated (a second call
 *   with the same key books again); its lookup by key finds what it booked once it has booked. Lookups do not take
 *   this fault: it applies to the calls that act.
 * - `duplicate-delivery` (target `queue`): the relay puts the next event(s) on the queue twice.
 */
const DOWNSTREAM_TARGETS = ['payments', 'tickets', 'mailbox'] as const;
const DOWNSTREAM_FAULT_MODES = ['commit-then-timeout', 'fail-before-commit', 'unavailable', 'slow', 'late-commit'] as const;
const QUEUE_FAULT_MODES = ['duplicate-delivery'] as const;

export type DownstreamTarget = (typeof DOWNSTREAM_TARGETS)[number];
export type FaultTarget = DownstreamTarget | 'queue';
export type FaultMode = (typeof DOWNSTREAM_FAULT_MODES)[number] | (typeof QUEUE_FAULT_MODES)[number];

const MAX_FAULT_TIMES = 100;
const MAX_FAULT_DELAY_MS = 60_000;

export const faultRequestSchema = z
  .object({
    target: z.enum([...DOWNSTREAM_TARGETS, 'queue']),
    mode: z.enum([...DOWNSTREAM_FAULT_MODES, ...QUEUE_FAULT_MODES]),
    times: z.number().int().min(1).max(MAX_FAULT_TIMES).default(1),
    /**
     * `slow`: how long to wait; `commit-then-timeout`: how long to hold the answer; `late-commit`: how long after
     * the call arrived it is applied (both default: past the caller's timeout).
     */
    delay_ms: z.number().int().min(0).max(MAX_FAULT_DELAY_MS).optional(),
  })
  .strict()
  .superRefine((fault, ctx) => {
    const queueMode = (QUEUE_FAULT_MODES as readonly string[]).includes(fault.mode);
    if (fault.target === 'queue' && !queueMode)
      ctx.addIssue({ code: 'custom', path: ['mode'], message: `target queue takes only ${QUEUE_FAULT_MODES.join(', ')}` });
    if (fault.target !== 'queue' && queueMode)
      ctx.addIssue({ code: 'custom', path: ['mode'], message: `${fault.mode} applies to target queue only` });
  });

export type FaultRequest = z.output<typeof faultRequestSchema>;

export interface ArmedFault {
  target: FaultTarget;
  mode: FaultMode;
  /** Calls it still applies to. */
  remaining: number;
  delay_ms?: number;
}
