import { TerminalToolError, TransientToolError, UncertainToolError } from '../../../lambdas/core/errors';
import { type IdempotencyPolicy, toolInFlightWindowMs } from '../../../lambdas/core/tool-policy';
import type { ExecutionContext } from '../../../lambdas/engine/write-request';
import { Actor, never } from './races-actors';
import { type CallerPlan, ON_THE_WIRE, TIMES } from './races-scenarios';
import type { World } from './races-world';

/*
 * The tool each caller of the race exploration runs (races-world.ts starts the callers): a local tool whose item
 * commits with the record, or a call to the made-up downstream, each meeting the fault its caller's plan names, and
 * the requests left on the wire after their caller gave up.
 */

/** One call as its caller planned it: who runs it, in which world, with which arguments and tool settings. */
export interface PlannedCall {
  world: World;
  actor: Actor;
  plan: CallerPlan;
  /** The arguments as sent; a tool that normalises its input changes them in place. */
  args: Record<string, unknown>;
  /** The key and the intent: what the downstream's ledger records. */
  operation: string;
  policy: IdempotencyPolicy;
}

/** A local tool: computes its result and the item it writes; nothing outside. The item commits with the record. */
export function localTool({ world, actor, plan, args, operation }: PlannedCall) {
  return async (ctx: ExecutionContext) => {
    if (plan.mutatesInput) args.note = 'normalised by the handler';
    await actor.step(`compute (${ctx.path})`, async () => {}, false);
    if (plan.downstream === 'transient') throw new TransientToolError('BUSY', 'a transient failure before any write');
    if (plan.downstream === 'terminal') throw new TerminalToolError('DECLINED', 'a business rule refused it');
    if (plan.downstream === 'hang_before') return never<never>();
    const id = `item-${world.nextLocalItem()}`;
    return {
      result: { effect: id, intent: operation },
      writes: [{ create: { key: { pk: `EFFECT#${ctx.idempotencyKey}`, sk: id }, item: { intent: operation, effect: id } } }],
    };
  };
}

/** A call to the downstream, which acts once per key if it dedups; the fault of the caller's plan strikes on the way. */
export function downstreamTool({ world, actor, plan, args, operation, policy }: PlannedCall) {
  return async (ctx: ExecutionContext) => {
    if (plan.mutatesInput) args.note = 'normalised by the handler';
    const fault = plan.downstream;
    await actor.step('downstream request', async () => {}, false);
    if (fault === 'transient') throw new TransientToolError('DOWNSTREAM_BUSY', 'the downstream refused before acting');
    // A downstream that dedups answers a key it already acted on with that effect, before any business rule.
    const acted = world.downstream.dedup && world.downstream.lookup(ctx.idempotencyKey) !== undefined;
    if (fault === 'terminal' && !acted) throw new TerminalToolError('DECLINED', 'the downstream declined');
    if (fault === 'hang_before') return never<never>();
    if (ON_THE_WIRE.includes(fault)) {
      // The executor works until just before its deadline (time passes), then sends: from here the request is on
      // the wire whatever becomes of its caller (a crash after this step included).
      if (fault === 'lands_late') {
        await actor.step(
          'works',
          async () => world.options.clock.advance(Math.max(0, ctx.deadline - 1 - world.options.clock.clock())),
          false,
        );
      }
      await actor.step(
        'sends',
        async () => {
          // The window bounds how long after its send a request can land (lambdas/core/in-flight.ts).
          const sentAt = world.options.clock.clock();
          const until = sentAt + toolInFlightWindowMs(policy, TIMES.downstreamTimeoutMs, 'external');
          const at = fault === 'lands_late' ? until - 1 : fault === 'lands_after_deadline' ? ctx.deadline + 1 : until;
          // An executor sends nothing after its deadline (the engine aborts its signal): every send is before the lease's end.
          if (ctx.signal.aborted || sentAt >= ctx.deadline) return;
          if (fault !== 'lands_after_window' || world.downstream.dedup)
            void onTheWire(world, ctx.idempotencyKey, operation, ctx.deadline, until, at);
        },
        false,
      );
      throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'our client gave up on the request; it is still on the wire');
    }
    // The downstream honours the call's deadline (the engine hands it the signal): nothing lands after it. This is
    // the assumption the promise for a downstream without dedup rests on (docs/correctness.md).
    const effect = await actor.step(
      'downstream lands',
      async () =>
        ctx.signal.aborted || world.options.clock.clock() >= ctx.deadline ? undefined : world.downstream.act(ctx.idempotencyKey, operation),
      false,
    );
    if (!effect) throw new UncertainToolError('ABORTED', 'the call was aborted at its deadline');
    if (fault === 'hang_after') return never<never>();
    await actor.step('downstream answers', async () => {}, false);
    if (fault === 'commit_then_timeout') throw new UncertainToolError('DOWNSTREAM_TIMEOUT', 'the downstream did not answer in time');
    return { result: { effect: effect.id, intent: effect.intent } };
  };
}

/**
 * A request on the wire (issue 48 item 7): it lands when the scheduler lets it (after a step of its own, so other
 * actors and time may move first), at `at` (time passes to it) or now if that is later; never at or after `until`,
 * its window's end, unless `at` is there already (a dedup downstream: a repeat of the key is the same effect).
 */
export async function onTheWire(world: World, key: string, operation: string, deadline: number, until: number, at: number) {
  const wire = new Actor(`wire:${key}`, world, undefined);
  world.actors.push(wire);
  await wire.step('on the wire', async () => {}, false);
  await wire.step(
    'lands',
    async () => {
      const { clock } = world.options;
      if (clock.clock() < at) clock.advance(at - clock.clock());
      const now = clock.clock();
      if (now >= until && at < until) return;
      world.downstream.act(key, operation);
      if (now >= deadline) world.landings.afterDeadline++;
      if (now >= until) world.landings.afterWindow++;
    },
    false,
  );
}
