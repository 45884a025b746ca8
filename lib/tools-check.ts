import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type * as esbuild from 'esbuild';
import { environmentOf } from '../lambdas/config';
import { lambdaBuildOptions, projectEsbuild } from './bundling';
import { packageFile, projectOf } from './package-root';

/** The team modules of an endpoint, checked at synth against what the functions will require of them at cold start. */
export interface ModuleCheck {
  /** Names the construct in the error (`IdempotentMcpEndpoint`). */
  readonly prop: string;
  /** Absolute path of the tools module. */
  readonly tools: string;
  /** Absolute path of the deliveries module, if any. */
  readonly deliveries?: string;
  /** The settings the functions get (`environment`): the modules load with them, as on Lambda. */
  readonly environment?: Record<string, string>;
}

/** What TABLE_NAME reads while the modules are checked: the real name exists only once deployed. */
const SYNTH_TABLE_NAME = 'idempotent-mcp-synth-check';

/** How long loading the modules may take before the synth gives up on them. */
const LOAD_TIMEOUT_MS = 60_000;

/** Results by modules and environment, with the files the check read (and their mtimes): a later synth reuses it while none changed. */
const checked = new Map<string, CheckResult>();

interface CheckResult {
  inputs: Array<[string, number]>;
  /** The module does not build, or does not export what the handlers require: the synth is refused. */
  problem?: string;
  /** The module did not load here (it may read a value that exists only deployed): its exports are checked at cold start. */
  unchecked?: string;
}

const mtimeOf = (file: string) => {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return -1;
  }
};

/**
 * Refuses, at synth, a tools module (or deliveries module) the functions would refuse at cold start: it is bundled
 * as the functions bundle it and loaded once in a child process (its top-level code runs there, not in the CDK
 * app), then read by the same checks the handlers run (`toolsOf`, `clientsOf`, `deliveriesOf`). Throws one sentence
 * naming the module and what is wrong. A module that throws while loading here (a setting that exists only once
 * deployed, say) is not refused: the answer says why it could not be checked, for a synth warning.
 */
export function checkModuleExports(check: ModuleCheck): { unchecked?: string } {
  const key = JSON.stringify([check.tools, check.deliveries ?? null, check.environment ?? {}]);
  // Kept on disk too, so each synth of an unchanged project (a test run, a second `cdk synth`) reuses it.
  const cacheFile = join(
    projectOf(check.tools).projectRoot,
    'node_modules',
    '.cache',
    'idempotent-mcp',
    `check-${createHash('sha256').update(key).digest('hex').slice(0, 16)}.json`,
  );
  const fresh = (result: CheckResult | undefined): result is CheckResult =>
    result !== undefined && result.inputs.length > 0 && result.inputs.every(([file, mtime]) => mtimeOf(file) === mtime);
  let result = checked.get(key);
  if (!fresh(result)) {
    try {
      result = JSON.parse(readFileSync(cacheFile, 'utf8')) as CheckResult;
    } catch {
      result = undefined;
    }
  }
  if (!fresh(result)) {
    result = runCheck(check);
    if (result.inputs.length > 0) {
      const temporary = `${cacheFile}.${process.pid}.tmp`;
      writeFileSync(temporary, JSON.stringify(result));
      renameSync(temporary, cacheFile);
    }
  }
  checked.set(key, result);
  if (result.problem) throw new Error(result.problem);
  return { unchecked: result.unchecked };
}

/** The esbuild the team's project bundles its functions with, or an error naming the prop. */
function loadEsbuild(projectRoot: string, prop: string): typeof esbuild {
  const found = projectEsbuild(projectRoot);
  if (!found)
    throw new Error(`${prop}: checking the tools module at synth needs esbuild, which also bundles the functions: npm install -D esbuild`);
  return found;
}

function runCheck(check: ModuleCheck): CheckResult {
  const { projectRoot } = projectOf(check.tools);
  const dir = join(projectRoot, 'node_modules', '.cache', 'idempotent-mcp');
  mkdirSync(dir, { recursive: true });
  const label = (kind: 'tools' | 'deliveries', file: string) => `${check.prop}: ${kind} module ${file}`;
  // The handlers' own checks, from the package (its sources here, its build once installed).
  const toolsChecks = packageFile('lambdas/functions/tools-exports.ts', 'dist/functions/tools-exports.js');
  const deliveriesChecks = packageFile('lambdas/functions/consumer-endpoint.ts', 'dist/functions/consumer-endpoint.js');
  const source = [
    `import { writeFileSync } from 'node:fs';`,
    `import { clientsOf, toolsOf } from ${JSON.stringify(toolsChecks)};`,
    ...(check.deliveries ? [`import { deliveriesOf } from ${JSON.stringify(deliveriesChecks)};`] : []),
    `const message = (err) => (err instanceof Error ? err.message : String(err)).split('\\n')[0];`,
    `async function check() {`,
    `  let tools;`,
    `  try { tools = await import(${JSON.stringify(check.tools)}); } catch (err) { return { unchecked: ${JSON.stringify(`${label('tools', check.tools)} did not load at synth, so its exports are checked at cold start only: `)} + message(err) }; }`,
    `  try { toolsOf(tools); clientsOf(tools, (s) => s); } catch (err) { return { problem: ${JSON.stringify(`${label('tools', check.tools)} is refused: `)} + message(err) }; }`,
    ...(check.deliveries
      ? [
          `  let deliveries;`,
          `  try { deliveries = await import(${JSON.stringify(check.deliveries)}); } catch (err) { return { unchecked: ${JSON.stringify(`${label('deliveries', check.deliveries)} did not load at synth, so its exports are checked at cold start only: `)} + message(err) }; }`,
          `  try { deliveriesOf(deliveries); } catch (err) { return { problem: ${JSON.stringify(`${label('deliveries', check.deliveries)} is refused: `)} + message(err) }; }`,
        ]
      : []),
    `  return {};`,
    `}`,
    // Exit at once: a module's timers or sockets must not keep the synth waiting.
    `check().then((result) => { writeFileSync(process.argv[2], JSON.stringify(result)); process.exit(0); });`,
    '',
  ].join('\n');
  const name = `check-${createHash('sha256').update(source).digest('hex').slice(0, 16)}`;
  const entry = join(dir, `${name}.entry.mjs`);
  // Named by its content, so written once: rewriting it would move its mtime, an input of every cached result of
  // this module (each environment's), and each check would undo the others' cache.
  if (!existsSync(entry)) {
    const temporary = `${entry}.${process.pid}.tmp`;
    writeFileSync(temporary, source);
    renameSync(temporary, entry);
  }

  let built: esbuild.BuildResult & { outputFiles: esbuild.OutputFile[]; metafile: esbuild.Metafile };
  try {
    built = loadEsbuild(projectRoot, check.prop).buildSync({
      // The functions' bundle options for the Node.js that runs the check here; unminified, as this bundle ships nowhere.
      ...lambdaBuildOptions(),
      minify: false,
      target: `node${process.versions.node.split('.')[0]}`,
      entryPoints: [entry],
      absWorkingDir: projectRoot,
      write: false,
      metafile: true,
      logLevel: 'silent',
      outfile: join(dir, `${name}.mjs`),
    });
  } catch (err) {
    const first = (err as { errors?: esbuild.Message[] }).errors?.[0];
    const where = first?.location ? ` (${first.location.file}:${first.location.line})` : '';
    const file =
      first?.location && resolve(projectRoot, first.location.file) === check.deliveries
        ? (['deliveries', check.deliveries] as const)
        : (['tools', check.tools] as const);
    return { inputs: [], problem: `${label(file[0], file[1])} does not build: ${first?.text ?? (err as Error).message}${where}` };
  }
  const inputs = Object.keys(built.metafile.inputs).map((file): [string, number] => {
    const path = resolve(projectRoot, file);
    return [path, mtimeOf(path)];
  });
  const bundle = join(dir, `${name}.mjs`);
  const resultFile = join(dir, `${name}.${process.pid}.result.json`);
  writeFileSync(bundle, built.outputFiles[0]!.contents);
  try {
    execFileSync(process.execPath, [bundle, resultFile], {
      cwd: projectRoot,
      // As on Lambda: the team's settings, and the toolkit's table name (a deploy-time value: a stand-in here).
      env: { ...process.env, ...environmentOf({ tableName: SYNTH_TABLE_NAME }), ...check.environment },
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: LOAD_TIMEOUT_MS,
    });
    if (!existsSync(resultFile)) throw new Error('it exited before the check ended');
    const { problem, unchecked } = JSON.parse(readFileSync(resultFile, 'utf8')) as Pick<CheckResult, 'problem' | 'unchecked'>;
    return { inputs, problem, unchecked };
  } catch (err) {
    const stderr = String((err as { stderr?: unknown }).stderr ?? '').trim();
    const reason = stderr.split('\n').find((line) => /Error|error/.test(line)) ?? stderr.split('\n')[0] ?? (err as Error).message;
    return {
      inputs,
      unchecked: `${label('tools', check.tools)} did not load at synth, so its exports are checked at cold start only: ${reason || (err as Error).message}`,
    };
  } finally {
    rmSync(resultFile, { force: true });
  }
}
