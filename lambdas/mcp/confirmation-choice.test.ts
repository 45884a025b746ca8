import { describe, expect, it } from 'vitest';
import { chooseConfirmation, type ConfirmationChoice, type ConfirmationChoiceInput } from './confirmation-choice';

/**
 * The confirmation choice, every combination: mode x protocol x the client's elicitation modes x the operator's lists
 * x whether the server has an approval page (192). The table below is docs/confirmation.md's "What each client gets"
 * written as rows; a field left out matches any value, an array any of its values. Every combination must match
 * exactly one row, so the rows cannot overlap nor leave a case out, and the choice must be that row's.
 */
type Dimension = { [K in keyof ConfirmationChoiceInput]: readonly ConfirmationChoiceInput[K][] };
const DIMENSIONS: Dimension = {
  mode: ['approval', 'required'],
  protocol: ['2026-07-28', '2025-11-25', 'earlier'],
  canElicitUrls: [true, false],
  canElicitForms: [true, false],
  approvalPage: [true, false],
  optedOut: [true, false],
  formFallback: [true, false],
};
type Row = { [K in keyof ConfirmationChoiceInput]?: ConfirmationChoiceInput[K] | readonly ConfirmationChoiceInput[K][] } & {
  then: ConfirmationChoice;
};

const LEGACY = ['2025-11-25', 'earlier'] as const;
const TABLE: readonly Row[] = [
  // 'approval': the person, signed in, on the page.
  { mode: 'approval', approvalPage: false, then: { kind: 'unavailable', reason: 'no_approval_page' } },
  { mode: 'approval', approvalPage: true, protocol: '2026-07-28', canElicitUrls: true, then: { kind: 'page' } },
  {
    mode: 'approval',
    approvalPage: true,
    protocol: '2026-07-28',
    canElicitUrls: false,
    canElicitForms: true,
    formFallback: true,
    then: { kind: 'form' },
  },
  // Form only (Claude Code), none (claude.ai), URL mode off (Codex): the link as a tool result, the same page.
  {
    mode: 'approval',
    approvalPage: true,
    protocol: '2026-07-28',
    canElicitUrls: false,
    canElicitForms: true,
    formFallback: false,
    then: { kind: 'link' },
  },
  { mode: 'approval', approvalPage: true, protocol: '2026-07-28', canElicitUrls: false, canElicitForms: false, then: { kind: 'link' } },
  { mode: 'approval', approvalPage: true, protocol: LEGACY, optedOut: true, then: { kind: 'run' } },
  { mode: 'approval', approvalPage: true, protocol: LEGACY, optedOut: false, then: { kind: 'link' } },
  // 'required': the client's form; the approval page plays no part.
  { mode: 'required', protocol: '2026-07-28', canElicitForms: true, then: { kind: 'form' } },
  { mode: 'required', protocol: '2026-07-28', canElicitForms: false, then: { kind: 'unavailable', reason: 'no_form_elicitation' } },
  { mode: 'required', protocol: LEGACY, optedOut: true, then: { kind: 'run' } },
  { mode: 'required', protocol: LEGACY, optedOut: false, then: { kind: 'unavailable', reason: 'protocol_cannot_answer' } },
];

function* combinations(): Generator<ConfirmationChoiceInput> {
  const keys = Object.keys(DIMENSIONS) as (keyof ConfirmationChoiceInput)[];
  const walk = function* (index: number, partial: Partial<ConfirmationChoiceInput>): Generator<ConfirmationChoiceInput> {
    if (index === keys.length) {
      yield partial as ConfirmationChoiceInput;
      return;
    }
    const key = keys[index]!;
    for (const value of DIMENSIONS[key]) yield* walk(index + 1, { ...partial, [key]: value });
  };
  yield* walk(0, {});
}

const matches = (row: Row, input: ConfirmationChoiceInput) =>
  (Object.keys(DIMENSIONS) as (keyof ConfirmationChoiceInput)[]).every((key) => {
    const wanted = row[key];
    if (wanted === undefined) return true;
    return Array.isArray(wanted) ? wanted.includes(input[key]) : wanted === input[key];
  });

describe('chooseConfirmation', () => {
  const all = [...combinations()];

  it('is given every combination', () => {
    expect(all).toHaveLength(2 * 3 * 2 * 2 * 2 * 2 * 2);
  });

  it.each(all.map((input) => [JSON.stringify(input), input] as const))('%s', (_name, input) => {
    const rows = TABLE.filter((row) => matches(row, input));
    expect(rows, 'exactly one row of the table covers this combination').toHaveLength(1);
    expect(chooseConfirmation(input)).toEqual(rows[0]!.then);
  });

  it('every row of the table is reached', () => {
    const reached = new Set(all.flatMap((input) => TABLE.filter((row) => matches(row, input))));
    expect(TABLE.filter((row) => !reached.has(row))).toEqual([]);
  });
});
