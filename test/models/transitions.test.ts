import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { allows, TRANSITION_TABLE, type RecordState, type TransitionEvent } from '../../lambdas/core/state-machine';
import { emitTransitions, GENERATED_TRANSITIONS } from './emit-transitions';

describe('one transition table for the code and the spin model', () => {
  it('the committed test/models/generated/transitions.pml is what the code emits (run `npx tsx test/models/emit-transitions.ts`)', () => {
    expect(readFileSync(GENERATED_TRANSITIONS, 'utf8')).toBe(emitTransitions());
  });

  it("every move of the code's table is in the model's table, and no other", () => {
    const text = emitTransitions();
    const ids = (prefix: string) =>
      new Map([...text.matchAll(new RegExp(`#define ${prefix}_(\\w+) (\\d+)`, 'g'))].map((m) => [m[1]!, m[2]!]));
    const states = ids('ST');
    const entries = new Set([...text.matchAll(/T\[ST_(\w+) \* NEVENTS \+ EV_(\w+)\] = ST_(\w+);/g)].map((m) => `${m[1]} ${m[2]} ${m[3]}`));
    const expected = new Set<string>();
    for (const from of Object.keys(TRANSITION_TABLE) as RecordState[]) {
      expect(states.has(from)).toBe(true);
      for (const [event, to] of Object.entries(TRANSITION_TABLE[from]) as Array<[TransitionEvent, RecordState]>) {
        expect(allows(from, event)).toBe(true);
        expected.add(`${from} ${event.toUpperCase()} ${to}`);
      }
    }
    expect(entries).toEqual(expected);
  });
});
