/**
 * One part of `npm run bench`. run.ts runs the sections in order, prints each one's table, and ends with one JSON
 * line holding every section's figures under its key (e.g. `{"engine": {...}, "coldStart": {...}}`).
 */
export interface BenchSection {
  /** The key of this section's figures in the final JSON line. */
  key: string;
  title: string;
  run(): Promise<SectionReport>;
}

export interface SectionReport {
  /** Machine-readable figures: they go into the final JSON line as they are. */
  figures: Record<string, unknown>;
  /** A human table: the first row is the header. */
  table: (string | number)[][];
  /** Lines printed under the table (targets met or missed, caveats). */
  notes?: string[];
}

/** Left-aligned text, right-aligned numbers, columns padded to their widest cell. */
export function formatTable(rows: (string | number)[][]): string {
  const widths: number[] = [];
  for (const row of rows) for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, String(cell).length);
  const line = (row: (string | number)[]) =>
    row.map((cell, i) => (typeof cell === 'number' ? String(cell).padStart(widths[i]!) : String(cell).padEnd(widths[i]!))).join('  ');
  const [header, ...body] = rows;
  if (!header) return '';
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}
