import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';

/**
 * The bench's comparisons as SVG bar charts a person can look at (docs/bench/*.svg, linked from docs/benchmarks.md),
 * redrawn by every `npm run bench` from the sections' figures. Plain SVG text: no chart library, nothing to install.
 */

/** One bar: its label and value, drawn to its panel's scale. */
export interface Bar {
  label: string;
  value: number;
}

/** Bars on one scale (one unit), with a heading: a chart has one panel per figure it compares. */
export interface Panel {
  title: string;
  unit: string;
  bars: Bar[];
}

/** What a chart says about its run: when, on how loaded a machine, and what the bars are. */
export interface RunCaption {
  /** When the run ended (ISO 8601). */
  date: string;
  /** The 1-minute load average when it ended. */
  loadAvg: number;
  cores: number;
  /** What the bars are (e.g. "medians of 1,280 calls per bar"). */
  what?: string;
}

export interface Chart {
  title: string;
  panels: Panel[];
  caption: RunCaption;
}

const WIDTH = 760;
const LABEL_WIDTH = 220;
const VALUE_WIDTH = 90;
/** The longest bar of a panel: the panel's largest value. */
export const BAR_SPAN = WIDTH - LABEL_WIDTH - VALUE_WIDTH - 20;
const ROW = 22;
const BAR_HEIGHT = 15;
const PANEL_GAP = 14;
const COLOURS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#b07aa1', '#9c755f'];

const escapeXml = (text: string) =>
  text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);

/** Numbers as a person reads them: at most three significant digits below 100, whole above. */
const formatValue = (value: number) =>
  Math.abs(value) >= 100 ? Math.round(value).toLocaleString('en-US') : String(Number(value.toPrecision(3)));

/** Captions as printed under every chart: the run's date (UTC, to the minute), its load and what the bars are. */
export function captionText(caption: RunCaption): string {
  const date = caption.date.replace('T', ' ').replace(/:\d\d(\.\d+)?Z$/, ' UTC');
  const what = caption.what ? `; ${caption.what}` : '';
  return `run ${date}; load average ${caption.loadAvg.toFixed(2)} on ${caption.cores} cores${what}`;
}

/**
 * A horizontal bar chart: per panel, each bar's length is its value over the panel's largest (0 for a value that is
 * not a positive finite number, labelled "n/a"). Each bar carries `data-label` and `data-value` for a reader or a test.
 */
export function barChart(chart: Chart): string {
  const out: string[] = [];
  let y = 34;
  out.push(`<text x="10" y="22" font-size="16" font-weight="bold">${escapeXml(chart.title)}</text>`);
  for (const panel of chart.panels) {
    y += PANEL_GAP;
    out.push(`<text x="10" y="${y}" font-size="13" font-weight="bold">${escapeXml(`${panel.title} (${panel.unit})`)}</text>`);
    y += 8;
    const drawable = (v: number) => Number.isFinite(v) && v > 0;
    const max = Math.max(0, ...panel.bars.map((b) => b.value).filter(drawable));
    for (const [i, bar] of panel.bars.entries()) {
      const width = drawable(bar.value) && max > 0 ? (bar.value / max) * BAR_SPAN : 0;
      const top = y + (ROW - BAR_HEIGHT) / 2;
      const label = escapeXml(bar.label);
      out.push(
        `<text x="${LABEL_WIDTH - 8}" y="${y + ROW / 2 + 4}" font-size="12" text-anchor="end">${label}</text>`,
        `<rect class="bar" data-label="${label}" data-value="${Number.isFinite(bar.value) ? bar.value : 'NaN'}" x="${LABEL_WIDTH}" y="${top}" width="${round(width)}" height="${BAR_HEIGHT}" fill="${COLOURS[i % COLOURS.length]}"/>`,
        `<text x="${round(LABEL_WIDTH + width + 6)}" y="${y + ROW / 2 + 4}" font-size="12">${Number.isFinite(bar.value) ? formatValue(bar.value) : 'n/a'}</text>`,
      );
      y += ROW;
    }
  }
  y += 22;
  out.push(`<text class="caption" x="10" y="${y}" font-size="11" fill="#555">${escapeXml(captionText(chart.caption))}</text>`);
  y += 12;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y}" viewBox="0 0 ${WIDTH} ${y}" font-family="sans-serif">`,
    `<title>${escapeXml(chart.title)}</title>`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...out,
    '</svg>',
    '',
  ].join('\n');
}

const round = (n: number) => Math.round(n * 10) / 10;

type Figures = Record<string, unknown>;
const isRecord = (value: unknown): value is Figures => typeof value === 'object' && value !== null && !Array.isArray(value);
const numberAt = (record: unknown, key: string) => (isRecord(record) && typeof record[key] === 'number' ? (record[key] as number) : NaN);

/** The engine section: p50 per variant in each path and concurrency (what the engine is held to: Powertools' p50). */
export function engineChart(figures: Figures, caption: RunCaption): Chart | undefined {
  const paths = figures.paths;
  if (!isRecord(paths)) return undefined;
  const panels: Panel[] = [];
  for (const [path, byConcurrency] of Object.entries(paths)) {
    if (!isRecord(byConcurrency)) continue;
    for (const [conc, variants] of Object.entries(byConcurrency)) {
      if (!isRecord(variants)) continue;
      const concurrency = conc.replace(/^c/, '');
      panels.push({
        title: `${path.replace('_', ' ')}, ${concurrency} at once: p50`,
        unit: 'ms',
        bars: Object.entries(variants).map(([variant, cell]) => ({ label: variant, value: numberAt(cell, 'p50_ms') })),
      });
    }
  }
  if (panels.length === 0) return undefined;
  const calls = isRecord(figures.calls_per_cell) ? figures.calls_per_cell : {};
  const what = `p50: the median of ${numberAt(calls, 'c1')} calls per bar at 1 at once, ${numberAt(calls, 'c32')} at 32`;
  return {
    title: 'The engine against Powertools idempotency (DynamoDB Local)',
    panels,
    caption: { ...caption, what, ...sectionLoad(figures, caption) },
  };
}

/** The gateway section: calls per second and p50 of every path it measured (gateway, relay, direct, ...). */
export function gatewayChart(figures: Figures, caption: RunCaption): Chart | undefined {
  const paths = Object.entries(figures).filter(
    ([, cell]) => isRecord(cell) && typeof cell.calls_per_s === 'number' && typeof cell.p50_ms === 'number',
  );
  if (paths.length === 0) return undefined;
  return {
    title: paths.some(([label]) => label === 'relay')
      ? "The gateway against the relay floor and the upstream's direct calls"
      : "The gateway against the upstream's direct calls",
    panels: [
      { title: 'calls per second', unit: 'calls/s', bars: paths.map(([label, cell]) => ({ label, value: numberAt(cell, 'calls_per_s') })) },
      { title: 'p50 latency', unit: 'ms', bars: paths.map(([label, cell]) => ({ label, value: numberAt(cell, 'p50_ms') })) },
    ],
    caption: { ...caption, what: 'p50: the median of every call of its path', ...sectionLoad(figures, caption) },
  };
}

/** The cold-start section: init and CPU of the deployed endpoint, of every other function beside it (the gateway) and of its peers. */
export function coldStartChart(figures: Figures, caption: RunCaption): Chart | undefined {
  if (typeof figures.init_ms !== 'number') return undefined;
  const rows: [string, unknown][] = [['endpoint (deployed)', figures]];
  for (const [name, value] of Object.entries(figures))
    if (name !== 'peers' && isRecord(value) && typeof value.init_ms === 'number') rows.push([name, value]);
  if (isRecord(figures.peers)) for (const [name, value] of Object.entries(figures.peers)) if (isRecord(value)) rows.push([name, value]);
  const runs = numberAt(figures, 'runs');
  return {
    title: 'Cold start: the MCP functions against their peers',
    panels: [
      {
        title: 'init (import, initialize, first tools/call)',
        unit: 'ms',
        bars: rows.map(([label, f]) => ({ label, value: numberAt(f, 'init_ms') })),
      },
      { title: 'CPU over the same span', unit: 'ms', bars: rows.map(([label, f]) => ({ label, value: numberAt(f, 'cpu_ms') })) },
    ],
    caption: { ...caption, what: `medians of ${runs} fresh processes each`, ...sectionLoad(figures, caption) },
  };
}

/** A section that noted its own load average (at its start) is captioned with it. */
const sectionLoad = (figures: Figures, caption: RunCaption) =>
  typeof figures.load_avg === 'number' ? { loadAvg: figures.load_avg } : { loadAvg: caption.loadAvg };

/** Which chart each section's figures make, and its file under docs/bench. */
const CHARTS: Record<string, { file: string; draw: (figures: Figures, caption: RunCaption) => Chart | undefined }> = {
  engine: { file: 'engine.svg', draw: engineChart },
  gateway: { file: 'gateway.svg', draw: gatewayChart },
  coldStart: { file: 'cold-start.svg', draw: coldStartChart },
};

/**
 * Draws the chart of every section in `figures` that has one into `dir` (default docs/bench; `BENCH_CHARTS_DIR`
 * elsewhere), each captioned with this moment and load; returns the files written. Sections not run keep their chart.
 */
export async function writeCharts(figures: Figures, dir = process.env.BENCH_CHARTS_DIR ?? 'docs/bench'): Promise<string[]> {
  const caption: RunCaption = { date: new Date().toISOString(), loadAvg: loadavg()[0]!, cores: availableParallelism() };
  const written: string[] = [];
  for (const [key, { file, draw }] of Object.entries(CHARTS)) {
    const section = figures[key];
    const chart = isRecord(section) ? draw(section, caption) : undefined;
    if (!chart) continue;
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, file), barChart(chart));
    written.push(join(dir, file));
  }
  return written;
}
