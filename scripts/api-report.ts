/**
 * `npm run api`: one API report per public subpath (exports/<subpath>.api.md), written by API Extractor from the package's
 * declarations, so a change of the public surface is a visible diff. test/package/api-report.test.ts runs the same
 * check without writing, on the declarations of the test run's packed package, and fails when a report is out of date.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CompilerState, Extractor, ExtractorConfig, ExtractorLogLevel, type ExtractorMessage } from '@microsoft/api-extractor';
import { emitDeclarations, PROJECT_ROOT, publicSubpaths } from './declarations';

export const API_FOLDER = join(PROJECT_ROOT, 'exports');

export interface ApiReportOutcome {
  readonly subpath: string;
  readonly reportFile: string;
  /** The report differs from the committed one (or none is committed). */
  readonly changed: boolean;
  /** API Extractor's errors and warnings (an unexported type the surface uses, for one). */
  readonly problems: string[];
}

/**
 * Checks (and with `update`, rewrites) every subpath's report: of the declarations the package ships when `tarball`
 * (a packed package: its build emitted them) is given, else of declarations emitted here as the build emits them.
 */
export function apiReports({ update, tarball }: { update: boolean; tarball?: string }): ApiReportOutcome[] {
  // Inside the project, so the declarations resolve their imports from the project's node_modules, and outside
  // node_modules: API Extractor takes a declaration under node_modules for an external package's and reports a name
  // re-exported from it as an import line, not with its signature.
  const work = mkdtempSync(join(PROJECT_ROOT, '.api-report-'));
  mkdirSync(API_FOLDER, { recursive: true });
  try {
    const types = join(work, 'types');
    if (tarball) execFileSync('tar', ['-xzf', tarball, '-C', work, '--strip-components=2', 'package/dist/types']);
    else emitDeclarations(types);
    const configs = publicSubpaths().map(({ name, out, source }) => {
      const reportName = out.replaceAll('/', '-');
      const config = ExtractorConfig.prepare({
        configObject: {
          projectFolder: PROJECT_ROOT,
          mainEntryPointFilePath: join(types, source.replace(/\.ts$/, '.d.ts')),
          // The report reads the declarations; it does not check them (`skipLibCheck`): a team's type check does, in
          // test/package/pack.test.ts (every subpath, `skipLibCheck: false`, the TypeScript a team installs).
          compiler: {
            overrideTsconfig: {
              compilerOptions: {
                target: 'ES2022',
                lib: ['ES2023'],
                module: 'NodeNext',
                moduleResolution: 'NodeNext',
                strict: true,
                types: ['node'],
                skipLibCheck: true,
              },
            },
          },
          apiReport: { enabled: true, reportFileName: reportName, reportFolder: API_FOLDER, reportTempFolder: join(work, 'reports') },
          docModel: { enabled: false },
          dtsRollup: { enabled: false },
          tsdocMetadata: { enabled: false },
          messages: {
            compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
            extractorMessageReporting: {
              default: { logLevel: ExtractorLogLevel.Warning },
              // Every exported declaration carries a release tag (`@public`, or `@beta` where a doc calls it experimental):
              // an untagged one is an error, so `npm run api` and the report test fail on it.
              'ae-missing-release-tag': { logLevel: ExtractorLogLevel.Error, addToApiReportFile: false },
              'ae-undocumented': { logLevel: ExtractorLogLevel.None },
            },
            tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
          },
        },
        packageJsonFullPath: join(PROJECT_ROOT, 'package.json'),
        configObjectFullPath: undefined,
      });
      return { name, reportName, config };
    });
    // One TypeScript program for every subpath: compiling the declarations (and aws-cdk-lib's) once per report is the slow part.
    const compilerState = CompilerState.create(configs[0]!.config, {
      additionalEntryPoints: configs.map((c) => c.config.mainEntryPointFilePath),
    });
    const exported = exportedNames(
      compilerState,
      configs.map((c) => c.config.mainEntryPointFilePath),
    );
    return configs.map(({ name, reportName, config }) => {
      const problems: string[] = [];
      const result = Extractor.invoke(config, {
        localBuild: update,
        compilerState,
        messageCallback: (message: ExtractorMessage) => {
          message.handled = true;
          if (message.logLevel !== ExtractorLogLevel.Error && message.logLevel !== ExtractorLogLevel.Warning) return;
          // API Extractor checks one entry point at a time: a type one subpath uses and another exports (`ToolDefinition`
          // in `/lambda`, from `/mcp`) is importable, and its declaration is printed in both reports.
          const forgotten = message.messageId === 'ae-forgotten-export' && /The symbol "([^"]+)"/.exec(message.text)?.[1];
          if (forgotten && exported.has(forgotten)) return;
          problems.push(`${message.messageId}: ${message.text}`);
        },
      });
      return { subpath: name, reportFile: `exports/${reportName}.api.md`, changed: result.apiReportChanged, problems };
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The names every entry point exports, read from the program API Extractor compiled (its own TypeScript's). */
function exportedNames(compilerState: CompilerState, entryFiles: string[]): Set<string> {
  interface Checker {
    getSymbolAtLocation(node: unknown): unknown;
    getExportsOfModule(module: unknown): { name: string }[];
  }
  const program = compilerState.program as { getSourceFile(path: string): unknown; getTypeChecker(): Checker };
  const checker = program.getTypeChecker();
  return new Set(
    entryFiles.flatMap((file) => {
      const module = checker.getSymbolAtLocation(program.getSourceFile(file));
      if (!module) throw new Error(`API Extractor's program has no module for ${file}`);
      return checker.getExportsOfModule(module).map((symbol) => symbol.name);
    }),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const outcomes = apiReports({ update: true });
  for (const o of outcomes) {
    console.log(`${o.changed ? 'updated' : 'unchanged'} ${o.reportFile} (${o.subpath})`);
    for (const p of o.problems) console.log(`  ${p}`);
  }
  // A problem (an untagged export, a type the surface uses but no subpath exports) fails the run, as it fails the test.
  if (outcomes.some((o) => o.problems.length > 0)) process.exitCode = 1;
}
