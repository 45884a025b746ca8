import type { CheckReport } from './scenarios';

/** The scorecard a person reads at a glance: one row per tool and scenario, then what to do about it. */
export function renderScorecard(report: CheckReport): string {
  const header = ['TOOL', 'SCENARIO', 'EFFECTS', 'ANSWERED', 'VERDICT'];
  const cells = report.rows.map((row) => [
    row.tool,
    row.scenario,
    row.effects === undefined ? '-' : String(row.effects),
    row.answers.join(' → ') || '-',
    `${row.verdict}${row.note ? ` (${row.note})` : ''}`,
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((cell) => cell[column]!.length)));
  const line = (cell: readonly string[]) =>
    cell.map((text, column) => (column === cell.length - 1 ? text : text.padEnd(widths[column]!))).join('  ');
  const uncounted = report.rows.filter((row) => row.verdict === 'UNKNOWN-not-counted').length;
  const counted = report.rows.filter((row) => row.effects !== undefined).length;
  return [
    `Retry-safety check of ${report.server}`,
    '',
    line(header),
    ...cells.map(line),
    '',
    report.duplicates > 0
      ? `${report.duplicates} scenario(s) made duplicate effects: a retry there commits twice. Put the gateway (docs/gateway.md) or the toolkit in front, then check again (docs/check.md).`
      : counted === 0
        ? 'Nothing was counted, so this run cannot tell whether a retry duplicates: give each write tool a lookup ("count") in --config (docs/check.md).'
        : `No duplicate effects counted${uncounted > 0 ? ` (${uncounted} scenario(s) not counted: give a lookup in --config)` : ''}.`,
    ...(report.stopped ? [`Stopped early: ${report.stopped}.`] : []),
  ].join('\n');
}
