import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { apiReports } from '../../scripts/api-report';
import { PROJECT_ROOT } from '../../scripts/declarations';
import { packedPackage } from './support';

/**
 * The public surface is a promise: each subpath's API report (exports/*.api.md, API Extractor's) is committed with every
 * name's full signature and release tag, so a change of what a team can import, or of a parameter's type, is a
 * visible diff that fails here. After a deliberate change, `npm run api` rewrites the reports (and CHANGELOG.md says
 * what changed). The declarations are those the packed package ships (the run's one `npm pack`, shared with
 * test/package/pack.test.ts), so the report is of what a team installs.
 */
it('matches the committed API report of every public subpath, and each surface names every type it uses', async () => {
  const outcomes = apiReports({ update: false, tarball: (await packedPackage()).tarball });
  expect(outcomes.length).toBeGreaterThan(0);
  expect(outcomes.filter((o) => o.changed).map((o) => `${o.reportFile} is out of date: run npm run api`)).toEqual([]);
  expect(outcomes.flatMap((o) => o.problems.map((p) => `${o.subpath}: ${p}`))).toEqual([]);
  // Named exports only: a re-export of a whole module would make each of its future names public unseen.
  expect(
    outcomes.filter((o) => /^export \* from/m.test(readFileSync(join(PROJECT_ROOT, o.reportFile), 'utf8'))).map((o) => o.subpath),
  ).toEqual([]);
}, 900_000);
