import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildLambdaBundle } from '../bench/lambda-bundle';
import { oncePerRun } from '../support/once-per-run';

/**
 * The reference endpoint's MCP function bundled as the deploy bundles it (`buildLambdaBundle`: lib/bundling.ts's
 * options), once per run (oncePerRun): test/cdk/bundle.test.ts serves requests with it and reads its inputs,
 * test/cdk/endpoint.test.ts looks for the demo tools in it. The file is shared: read or run it, never write it.
 */
export async function referenceMcpBundle() {
  type Built = Awaited<ReturnType<typeof buildLambdaBundle>>;
  const shared = await oncePerRun('reference-mcp-bundle', async (dir) => {
    const { figures, metafile } = await buildLambdaBundle(join(dir, 'index.mjs'));
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify({ figures, metafile }));
  });
  const { figures, metafile }: Pick<Built, 'figures' | 'metafile'> = JSON.parse(readFileSync(join(shared, 'bundle.json'), 'utf8'));
  return { file: join(shared, 'index.mjs'), figures, metafile };
}
