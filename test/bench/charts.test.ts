import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BAR_SPAN, barChart, coldStartChart, engineChart, gatewayChart, type RunCaption, writeCharts } from './charts';

/** The charts `npm run bench` draws: what a person reads off them is what the run measured. */
const caption: RunCaption = { date: '2026-12-06T23:41:07.123Z', loadAvg: 0.734, cores: 2 };

/** Each bar as drawn: its label, its value and its length. */
function bars(svg: string) {
  return [...svg.matchAll(/<rect class="bar" data-label="([^"]*)" data-value="([^"]*)"[^>]* width="([^"]*)"/g)].map(
    ([, label, value, width]) => ({
      label,
      value: Number(value),
      width: Number(width),
    }),
  );
}

const texts = (svg: string) => [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map(([, text]) => text);

describe('barChart', () => {
  it('draws each bar in proportion to its value, the largest of its panel at full length, each panel to its own scale', () => {
    const svg = barChart({
      title: 'two panels',
      panels: [
        {
          title: 'p50',
          unit: 'ms',
          bars: [
            { label: 'a', value: 40 },
            { label: 'b', value: 10 },
            { label: 'c', value: 30 },
          ],
        },
        {
          title: 'calls per second',
          unit: 'calls/s',
          bars: [
            { label: 'a', value: 500 },
            { label: 'b', value: 1000 },
          ],
        },
      ],
      caption,
    });
    const drawn = bars(svg);
    expect(drawn.map((b) => [b.label, b.value])).toEqual([
      ['a', 40],
      ['b', 10],
      ['c', 30],
      ['a', 500],
      ['b', 1000],
    ]);
    expect(drawn[0]!.width).toBeCloseTo(BAR_SPAN, 0);
    expect(drawn[1]!.width / drawn[0]!.width).toBeCloseTo(0.25, 2);
    expect(drawn[2]!.width / drawn[0]!.width).toBeCloseTo(0.75, 2);
    expect(drawn[4]!.width).toBeCloseTo(BAR_SPAN, 0);
    expect(drawn[3]!.width / drawn[4]!.width).toBeCloseTo(0.5, 2);
  });

  it('labels every bar, its value and its panel, and captions the run with its date, load and what the bars are', () => {
    const svg = barChart({
      title: 'The engine',
      panels: [
        {
          title: 'first call',
          unit: 'ms',
          bars: [
            { label: 'powertools', value: 12.345 },
            { label: 'engine', value: 1234.5 },
          ],
        },
      ],
      caption: { ...caption, what: 'medians of 480 calls' },
    });
    const shown = texts(svg);
    expect(shown).toEqual(expect.arrayContaining(['The engine', 'first call (ms)', 'powertools', 'engine', '12.3', '1,235']));
    expect(shown.at(-1)).toBe('run 2026-12-06 23:41 UTC; load average 0.73 on 2 cores; medians of 480 calls');
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  });

  it('draws a missing figure as an empty bar marked n/a, and escapes text so the file stays SVG', () => {
    const svg = barChart({
      title: 'a <b> & "c"',
      panels: [
        {
          title: 'x',
          unit: 'ms',
          bars: [
            { label: 'relay <floor>', value: Number.NaN },
            { label: 'direct', value: 8 },
          ],
        },
      ],
      caption,
    });
    expect(bars(svg).map((b) => b.width)).toEqual([0, BAR_SPAN]);
    expect(texts(svg)).toEqual(expect.arrayContaining(['n/a', 'relay &lt;floor&gt;', 'a &lt;b&gt; &amp; &quot;c&quot;']));
    expect(svg).not.toContain('<floor>');
  });
});

describe("the sections' charts", () => {
  it('the engine chart has a panel per path and concurrency, a bar per variant at its p50', () => {
    const cell = (p50_ms: number) => ({ p50_ms, p99_ms: 2 * p50_ms, calls_per_s: 100 });
    const chart = engineChart(
      {
        paths: {
          first_call: { c1: { powertools: cell(10), engine: cell(9) }, c32: { powertools: cell(200), engine: cell(180) } },
          replay: { c1: { powertools: cell(4), engine: cell(3) } },
        },
        calls_per_cell: { c1: 480, c32: 1280 },
        load_avg: 0.5,
      },
      caption,
    )!;
    expect(chart.panels.map((p) => p.title)).toEqual([
      'first call, 1 at once: p50',
      'first call, 32 at once: p50',
      'replay, 1 at once: p50',
    ]);
    expect(chart.panels[1]!.bars).toEqual([
      { label: 'powertools', value: 200 },
      { label: 'engine', value: 180 },
    ]);
    expect(chart.caption.loadAvg).toBe(0.5);
    expect(chart.caption.what).toContain('480 calls');
  });

  it('the gateway chart draws every path the section measured, the relay floor included when there is one', () => {
    const chart = gatewayChart(
      {
        gateway: { calls: 800, calls_per_s: 180, p50_ms: 42 },
        relay: { calls: 800, calls_per_s: 300, p50_ms: 25 },
        direct: { calls: 800, calls_per_s: 855, p50_ms: 8 },
        calls_per_s_vs_direct: 0.21,
        load_avg: 0.9,
      },
      caption,
    )!;
    expect(chart.panels.map((p) => p.bars)).toEqual([
      [
        { label: 'gateway', value: 180 },
        { label: 'relay', value: 300 },
        { label: 'direct', value: 855 },
      ],
      [
        { label: 'gateway', value: 42 },
        { label: 'relay', value: 25 },
        { label: 'direct', value: 8 },
      ],
    ]);
  });

  it('the cold-start chart draws the deployed endpoint, the gateway beside it and every peer by init and CPU', () => {
    const chart = coldStartChart(
      {
        init_ms: 319,
        cpu_ms: 250,
        runs: 11,
        load_avg: 1.1,
        gateway: { init_ms: 640, cpu_ms: 500 },
        peers: { unminified: { init_ms: 340, cpu_ms: 270 }, floor: { init_ms: 247, cpu_ms: 210 } },
      },
      caption,
    )!;
    expect(chart.panels[0]!.bars).toEqual([
      { label: 'endpoint (deployed)', value: 319 },
      { label: 'gateway', value: 640 },
      { label: 'unminified', value: 340 },
      { label: 'floor', value: 247 },
    ]);
    expect(chart.caption.what).toBe('medians of 11 fresh processes each');
  });

  it('writes a chart for each section that ran, and none for a section without one', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'bench-charts-'));
    try {
      const written = await writeCharts({ gateway: { gateway: { calls_per_s: 1, p50_ms: 2 } }, tableShape: { anything: 1 } }, dir);
      expect(written).toEqual([join(dir, 'gateway.svg')]);
      expect(await readdir(dir)).toEqual(['gateway.svg']);
      expect(bars(await readFile(join(dir, 'gateway.svg'), 'utf8')).map((b) => b.label)).toEqual(['gateway', 'gateway']);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
