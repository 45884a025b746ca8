import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { referenceSynth } from './support';

describe('npm run synth', () => {
  /** A header every AWS SDK v3 client sends (its retry middleware), and nothing else in these bundles. */
  const SDK_CLIENT_MARK = 'amz-sdk-invocation-id';

  it('synthesizes offline with the real CLI, bundling every function with the local esbuild, nag included', async () => {
    // Exit code 0 also means no unacknowledged cdk-nag finding: bin/app.ts registers the packs. The synth runs once
    // per test run into a fresh folder.
    const { outdir, stderr } = await referenceSynth();
    // Every function bundled by this synth (nothing staged before it).
    expect(stderr.match(/^Bundling asset /gm)).toHaveLength(4);
    // --quiet is quiet: no esbuild size table or timing per function (CDK's own "Bundling asset ..." line remains).
    expect(stderr).not.toMatch(/Done in \d+ms/);
    expect(stderr).not.toMatch(/index\.mjs\s+\d/);

    const template = JSON.parse(readFileSync(join(outdir, 'IdempotentMcp.template.json'), 'utf8'));
    const functions = Object.entries<any>(template.Resources).filter(([, r]) => r.Type === 'AWS::Lambda::Function');
    expect(functions).toHaveLength(4);
    const assets = JSON.parse(readFileSync(join(outdir, 'IdempotentMcp.assets.json'), 'utf8')).files;
    const codes: string[] = [];
    for (const [, fn] of functions) {
      const hash = fn.Properties.Code.S3Key.replace(/\.zip$/, '');
      const bundle = join(outdir, assets[hash].source.path, 'index.mjs');
      expect(existsSync(bundle)).toBe(true);
      // ESM with the require shim, nothing left to resolve from node_modules at run time.
      const code = readFileSync(bundle, 'utf8');
      expect(
        code.startsWith('import{createRequire as __bundleCreateRequire}from"node:module"') ||
          code.startsWith('import { createRequire as __bundleCreateRequire }'),
      ).toBe(true);
      expect(code).not.toMatch(/from\s*"@aws-sdk\//);
      // The stubs of lib/bundling.ts reach the CDK's esbuild too (as --alias arguments): no function carries zod 3
      // or zod-to-json-schema (each string is from one of them).
      expect(code).not.toContain('Invalid enum value. Expected');
      expect(code).not.toContain('Recursive reference detected at');
      codes.push(code);
    }
    // ...and the MCP function runs Ajv's stub in its place. Every function reaches DynamoDB through the AWS SDK
    // client, with the SDK's own default credential chain (no stub of it).
    expect(codes.filter((code) => code.includes('(Ajv) is not bundled in this Lambda'))).toHaveLength(1);
    expect(codes.every((code) => code.includes(SDK_CLIENT_MARK))).toBe(true);
    expect(codes.every((code) => code.includes('DynamoDB_20120810') && code.includes('defaultProvider::fromIni'))).toBe(true);

    // The acknowledgments (with their reasons) are in the template as the audit trail of what nag allowed.
    const url = Object.values<any>(template.Resources).find((r) => r.Type === 'AWS::Lambda::Url');
    expect(url.Metadata.cdk_nag.rules_to_suppress).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: 'IdempotentMcp-LambdaFunctionUrlAuth', reason: expect.stringContaining('bearer') }),
      ]),
    );
  }, 300_000);
});
