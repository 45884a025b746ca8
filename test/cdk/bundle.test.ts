import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildLambdaBundle, startColdStartFixture, type ColdStartFixture } from '../../bench/cold-start';

/**
 * The MCP bundle exactly as `cdk deploy` ships it (lib/bundling.ts): a fresh Node process imports it and serves
 * Function URL events against DynamoDB Local. Timing lives in `npm run bench`; this checks that the artifact works
 * and that what was cut from it stays cut.
 */
describe('the deployed MCP bundle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bundle-'));
  let fixture: ColdStartFixture;
  let bundle: Awaited<ReturnType<typeof buildLambdaBundle>>;

  beforeAll(async () => {
    bundle = await buildLambdaBundle(join(dir, 'index.mjs'));
    fixture = await startColdStartFixture({ dynamodbEndpoint: inject('dynamodbEndpoint'), workDir: dir });
  });
  afterAll(async () => {
    await fixture?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers initialize and a create_order tools/call in a fresh process (ESM, require shim, top-level await)', async () => {
    // run() throws unless both answers are HTTP 200 and the write succeeded.
    const times = await fixture.run(bundle.file);
    expect(times.statuses).toEqual([200, 200]);
  });

  it("runs with the MCP SDK's inlined Ajv stubbed out: nothing on the initialize or tools/call path constructs it", () => {
    // The first test answered both requests with this bundle; here, that it really was the stubbed one.
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /node_modules\/(ajv|ajv-formats|fast-uri)\/|@modelcontextprotocol\/server\/dist\/(ajvProvider|shimsNode)/.test(file))).toEqual([]);
    expect(inputs.filter((file) => file.startsWith('lib/bundle-stubs/')).sort()).toEqual(
      [
        'lib/bundle-stubs/mcp-server-shims.mjs',
        'lib/bundle-stubs/credential-provider-lambda.ts',
        'lib/bundle-stubs/smithy-event-streams.mjs',
      ].sort(),
    );
  });

  it('carries neither the sandbox downstreams (deployed, a function of their own) nor Hono\'s larger routers', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /lambdas\/sandbox\/(router|downstreams)\.ts$/.test(file))).toEqual([]);
    expect(inputs.filter((file) => /hono\/dist\/router\/(reg-exp|trie|linear)-router\//.test(file))).toEqual([]);
  });

  it('carries one zod (4): the MCP SDK reaches zod 3 and its JSON Schema converter only for zod 3 schemas', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /node_modules\/(zod\/v3\/|zod-to-json-schema\/)/.test(file))).toEqual([]);
  });

  it('carries the environment and container credential providers only, not the chain with its STS and SSO clients', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.some((file) => file.includes('@aws-sdk/credential-provider-env/'))).toBe(true);
    expect(inputs.some((file) => file.includes('@aws-sdk/credential-provider-http/'))).toBe(true);
    expect(inputs.filter((file) => /@aws-sdk\/(credential-provider-(node|ini|sso|process|web-identity|login)|nested-clients)\//.test(file))).toEqual([]);
  });

  it("gives the bundled SDK clients Lambda's environment credentials, and fails plainly without them", async () => {
    const { file } = await buildLambdaBundle(join(dir, 'credentials.mjs'), { entry: 'test/support/bundle-credentials-entry.ts' });
    const run = (env: Record<string, string>) =>
      JSON.parse(execFileSync(process.execPath, [file], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' })) as Record<string, string>;
    const clients = ['dynamodb', 'sqs', 'sesv2'];
    const each = (value: string) => Object.fromEntries(clients.map((client) => [client, value]));
    expect(run({ AWS_ACCESS_KEY_ID: 'ASIALAMBDA', AWS_SECRET_ACCESS_KEY: 'secret', AWS_SESSION_TOKEN: 'token' })).toEqual(each('ASIALAMBDA'));
    expect(run({})).toEqual(each('error: CredentialsProviderError'));
  });

  it('carries no Secrets Manager client (the operation-id key comes through the extension) and no event-stream codec', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /@aws-sdk\/client-secrets-manager\/|@smithy\/core\/dist-es\/submodules\/event-streams\//.test(file))).toEqual([]);
  });

  it('carries no SES client: the MCP function only commits outbox events, the consumer sends the email', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => file.includes('@aws-sdk/client-sesv2/') || file.endsWith('downstream/ses-email.ts'))).toEqual([]);
  });

  it('carries no zod locales: `import * as z from "zod"` lets esbuild drop them (an `import { z }` pulls in ~260 KB)', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => file.includes('zod/v4/locales/') && !file.endsWith('/en.js'))).toEqual([]);
  });
});
