import { engineBench } from './engine-bench';
import { floorBench } from './floor';
import { endpointBench } from './endpoint';
import { coldStartBench } from './cold-start';
import { tableShapeBench } from './table-shape';
import { capacityBench } from './capacity';
import { gatewayBench } from './gateway';
import { formatTable, type BenchSection } from './section';

/**
 * `npm run bench`: each section measures one thing and returns its figures; the last line printed is ONE JSON
 * object with all of them, keyed by section, for CI to parse. Add a section by appending it here.
 */
const all: BenchSection[] = [floorBench, endpointBench, engineBench, tableShapeBench, coldStartBench, capacityBench, gatewayBench];
/** `npm run bench -- gateway engine`: only the sections with these keys. */
const only = process.argv.slice(2);
const sections = only.length ? all.filter((section) => only.includes(section.key)) : all;

const figures: Record<string, unknown> = {};
for (const section of sections) {
  console.log(`\n== ${section.title} ==`);
  const report = await section.run();
  console.log(formatTable(report.table));
  for (const note of report.notes ?? []) console.log(note);
  figures[section.key] = report.figures;
}
console.log(JSON.stringify(figures));
