import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The slowest files first, by the per-file durations committed in test/durations.json (`npm run test:durations`
 * rewrites them from a run's JSON report). Vitest's own order on a fresh clone, with no results cache, is the
 * largest file first, and the slowest files here are small ones (the model checks, the API report, the pack test):
 * started last, each would run alone at the end on an otherwise idle machine. A file the list does not know (a new
 * one) runs first, as vitest runs unknown files first.
 */
export class SlowestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const seconds: Record<string, number> = JSON.parse(readFileSync(new URL('../durations.json', import.meta.url), 'utf8')).seconds;
    const root = this.ctx.config.root;
    const cost = (file: TestSpecification) => seconds[relative(root, file.moduleId)] ?? Number.POSITIVE_INFINITY;
    return [...files].sort((a, b) => cost(b) - cost(a));
  }
}
