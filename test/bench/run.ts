import { engineBench } from './engine-bench';
import { floorBench } from './floor';
import { endpointBench } from './endpoint';
import { coldStartBench } from './cold-start';
import { tableShapeBench } from './table-shape';
import { capacityBench } from './capacity';
import { gatewayBench } from './gateway';
import { formatTable, type BenchSection } from './section';
import { writeCharts } from './charts';

/**
 * `npm run bench`: each section measures one thing and returns its figures; the last line printed is ONE JSON
 * object with all of them, keyed by section, for CI to parse. Add a section by appending it here.
 * `npm run bench -- coldStart endpoint` runs only the sections with those keys.
 */
const sections: BenchSection[] = [floorBench, endpointBench, engineBench, tableShapeBench, coldStartBench, capacityBench, gatewayBench];

const only = process.argv.slice(2);
const unknown = only.filter((key) => !sections.some((section) => section.key === key));
if (unknown.length > 0) {
  console.error(`no bench section ${unknown.join(', ')}; the sections are ${sections.map((s) => s.key).join(', ')}`);
  process.exit(2);
}

const figures: Record<string, unknown> = {};
for (const section of sections) {
  if (only.length > 0 && !only.includes(section.key)) continue;
  console.log(`\n== ${section.title} ==`);
  const report = await section.run();
  console.log(formatTable(report.table));
  for (const note of report.notes ?? []) console.log(note);
  figures[section.key] = report.figures;
}
// The charts of the sections that ran (docs/bench/*.svg), before the JSON line, which stays the last.
for (const file of await writeCharts(figures)) console.log(`chart: ${file}`);
console.log(JSON.stringify(figures));
