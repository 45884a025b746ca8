import { execFile, execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { functionUrlEvent, startColdStartFixture, type ColdStartFixture } from '../bench/cold-start-fixture';
import { buildLambdaBundle } from '../bench/lambda-bundle';
import { deliveriesFunctionEntry, toolsFunctionEntry } from '../../lib/tools-entry';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { keyHeaders, MODERN_PROTOCOL, orderArgs } from '../support/mcp';
import { referenceMcpBundle } from './reference-bundle';

/** Imports the bundle in a fresh Node process, passes it the events in order, and prints what it answered. */
const SERVE_EVENTS = `
import { pathToFileURL } from 'node:url';
const { handler } = await import(pathToFileURL(process.argv[2]).href);
const context = { functionName: 'mcp', awsRequestId: 'bundle-test', getRemainingTimeInMillis: () => 29000, callbackWaitsForEmptyEventLoop: true };
const answers = [];
for (const event of JSON.parse(process.env.BUNDLE_EVENTS)) answers.push(await handler(event, context));
process.stdout.write('\\n@@answers@@' + JSON.stringify(answers) + '\\n');
process.exit(0);
`;

/**
 * The MCP bundle exactly as `cdk deploy` ships it (lib/bundling.ts): a fresh Node process imports it and serves
 * Function URL events against DynamoDB Local. Timing lives in `npm run bench`; this checks that the artifact works
 * and that what was cut from it stays cut.
 */
describe('the deployed MCP bundle', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-bundle-'));
  let fixture: ColdStartFixture;
  let bundle: Awaited<ReturnType<typeof referenceMcpBundle>>;

  beforeAll(async () => {
    bundle = await referenceMcpBundle();
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

  it('serves tools/list and create_order twice with one key (the second replayed) to both protocol eras', async () => {
    const rpc = (id: number, method: string, params: Record<string, unknown>) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
    const legacyKey = `bundle-${randomUUID()}`;
    const modernKey = `bundle-${randomUUID()}`;
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL, 'io.modelcontextprotocol/clientCapabilities': {} };
    const modern = (id: number, method: string, params: Record<string, unknown>, name?: string) =>
      functionUrlEvent(rpc(id, method, { ...params, _meta: meta }), fixture.token, {
        'mcp-protocol-version': MODERN_PROTOCOL,
        'mcp-method': method,
        ...(name ? { 'mcp-name': name } : {}),
        ...keyHeaders((params.arguments ?? {}) as Record<string, unknown>),
      });
    const legacy = (id: number, method: string, params: Record<string, unknown>) =>
      functionUrlEvent(rpc(id, method, params), fixture.token);
    const order = (key: string) => ({ name: 'create_order', arguments: orderArgs(key) });
    const events = [
      legacy(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bundle-test', version: '1' } }),
      legacy(2, 'tools/list', {}),
      legacy(3, 'tools/call', order(legacyKey)),
      legacy(4, 'tools/call', order(legacyKey)),
      modern(5, 'server/discover', {}),
      modern(6, 'tools/list', {}),
      modern(7, 'tools/call', order(modernKey), 'create_order'),
      modern(8, 'tools/call', order(modernKey), 'create_order'),
    ];
    const script = join(dir, 'serve-events.mjs');
    writeFileSync(script, SERVE_EVENTS);
    const { stdout } = await promisify(execFile)(process.execPath, [script, bundle.file], {
      env: { ...fixture.env, BUNDLE_EVENTS: JSON.stringify(events) },
      maxBuffer: 16 * 1024 * 1024,
    });
    const answers = (JSON.parse(stdout.split('@@answers@@')[1]!) as Array<{ statusCode: number; body: string }>).map((answer) => ({
      status: answer.statusCode,
      ...(JSON.parse(answer.body) as { result?: Record<string, any>; error?: unknown }),
    }));
    expect(answers.map((answer) => [answer.status, answer.error])).toEqual(events.map(() => [200, undefined]));
    const [, legacyList, legacyFirst, legacySecond, discover, modernList, modernFirst, modernSecond] = answers.map(
      (answer) => answer.result!,
    );
    expect(discover!.supportedVersions).toEqual([MODERN_PROTOCOL]);
    for (const list of [legacyList, modernList]) expect(list!.tools.map((tool: { name: string }) => tool.name)).toContain('create_order');
    expect(modernList!.resultType).toBe('complete');
    for (const [first, second] of [
      [legacyFirst, legacySecond],
      [modernFirst, modernSecond],
    ]) {
      expect(first!.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: false });
      expect(second!.structuredContent).toMatchObject({ outcome: 'succeeded', replayed: true, result: first!.structuredContent.result });
    }
  });

  it("runs with the MCP SDK's inlined Ajv stubbed out: nothing on the initialize or tools/call path constructs it", () => {
    // The first test answered both requests with this bundle; here, that it really was the stubbed one.
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(
      inputs.filter((file) =>
        /node_modules\/(ajv|ajv-formats|fast-uri)\/|@modelcontextprotocol\/server\/dist\/(ajvProvider|shimsNode)/.test(file),
      ),
    ).toEqual([]);
    expect(inputs.filter((file) => file.startsWith('lib/bundle-stubs/'))).toEqual(['lib/bundle-stubs/mcp-server-shims.mjs']);
  });

  it("carries neither the sandbox downstreams (deployed, a function of their own) nor Hono's larger routers", () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /lambdas\/sandbox\/(router|downstreams)\.ts$/.test(file))).toEqual([]);
    expect(inputs.filter((file) => /hono\/dist\/router\/(reg-exp|trie|linear)-router\//.test(file))).toEqual([]);
  });

  it('carries neither the development issuer nor its sign-in page (deployed, the dev issuer is refused)', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /lambdas\/(http\/dev-sign-in|auth\/dev-issuer)\.ts$/.test(file))).toEqual([]);
  });

  it('carries one zod (4): the MCP SDK reaches zod 3 and its JSON Schema converter only for zod 3 schemas', () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    expect(inputs.filter((file) => /node_modules\/(zod\/v3\/|zod-to-json-schema\/)/.test(file))).toEqual([]);
  });

  it("reaches DynamoDB through the AWS SDK's document client, with the SDK's own credential chain and HTTP handler", () => {
    const inputs = Object.keys(Object.values(bundle.metafile.outputs)[0]!.inputs);
    for (const pkg of [
      '@aws-sdk/client-dynamodb/',
      '@aws-sdk/lib-dynamodb/',
      '@aws-sdk/credential-provider-node/',
      '@smithy/node-http-handler/',
    ]) {
      expect(
        inputs.some((file) => file.includes(`node_modules/${pkg}`)),
        pkg,
      ).toBe(true);
    }
    expect(inputs.filter((file) => file.startsWith('lib/bundle-stubs/') && !/mcp-server-shims|ajv|zod/.test(file))).toEqual([]);
  });

  it("gives the bundled SDK clients Lambda's environment credentials, and fails plainly without them", async () => {
    const { file } = await buildLambdaBundle(join(dir, 'credentials.mjs'), { entry: 'test/support/bundle-credentials-entry.ts' });
    // No instance metadata or profile on this machine to fall back on: the chain ends at the environment, as in Lambda.
    const offline = {
      PATH: process.env.PATH ?? '',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: '/nonexistent',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
    };
    const run = (env: Record<string, string>) =>
      JSON.parse(execFileSync(process.execPath, [file], { env: { ...offline, ...env }, encoding: 'utf8' })) as Record<string, string>;
    const clients = ['dynamodb', 'sqs', 'sesv2'];
    const each = (value: string) => Object.fromEntries(clients.map((client) => [client, value]));
    expect(run({ AWS_ACCESS_KEY_ID: 'ASIALAMBDA', AWS_SECRET_ACCESS_KEY: 'secret', AWS_SESSION_TOKEN: 'token' })).toEqual(
      each('ASIALAMBDA'),
    );
    expect(run({})).toEqual(each('error: CredentialsProviderError'));
  });

  it('carries the Secrets Manager client the operation-id key is read with (no layer), and prints what it costs', () => {
    const inputs = Object.entries(Object.values(bundle.metafile.outputs)[0]!.inputs);
    const client = inputs.filter(([file]) => /@aws-sdk\/client-secrets-manager\//.test(file));
    expect(client.length).toBeGreaterThan(0);
    const bytes = client.reduce((sum, [, { bytesInOutput }]) => sum + bytesInOutput, 0);
    console.log(`Secrets Manager client in the MCP bundle: ${bytes} of ${bundle.figures.bytes} bytes (minified)`);
  });

  it("leaves the MCP SDK out of the reconciler, the demo one and a team's (its factory is not the MCP function's)", async () => {
    // The generated entry of IdempotentMcpEndpoint, here over the demo's tools module.
    const team = toolsFunctionEntry('reconciler', join(PROJECT_ROOT, 'reference/tools/index.ts'));
    for (const [name, entry] of [
      ['demo', 'reference/handlers/reconciler.ts'],
      ['team', team],
    ] as const) {
      const { metafile } = await buildLambdaBundle(join(dir, `reconciler-${name}.mjs`), { entry });
      const inputs = Object.keys(Object.values(metafile.outputs)[0]!.inputs);
      expect(inputs.filter((file) => file.includes('@modelcontextprotocol/'))).toEqual([]);
    }
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

/**
 * Each worker function bundles what it uses and nothing of what serving a request takes: no token verifier (jose),
 * no engine, no signers; and no downstream client unless its own deliveries or reconcile hooks call one.
 */
describe('the deployed worker bundles', () => {
  const dir = mkdtempSync(join(tmpdir(), 'worker-bundles-'));
  const teamTools = join(PROJECT_ROOT, 'examples/cdk-app/tools.ts');
  const entries = {
    relay: 'lambdas/functions/relay.ts',
    'demo consumer': 'reference/handlers/consumer.ts',
    "a team's consumer": deliveriesFunctionEntry(join(PROJECT_ROOT, 'examples/cdk-app/deliveries.ts'), teamTools),
    'demo reconciler': 'reference/handlers/reconciler.ts',
    "a team's reconciler": toolsFunctionEntry('reconciler', teamTools),
  };
  const inputs: Record<string, string[]> = {};

  beforeAll(async () => {
    for (const [name, entry] of Object.entries(entries)) {
      const { metafile } = await buildLambdaBundle(join(dir, `${name.replace(/\W+/g, '-')}.mjs`), {
        entry,
        tsconfig: join(PROJECT_ROOT, 'tsconfig.json'),
      });
      inputs[name] = Object.keys(Object.values(metafile.outputs)[0]!.inputs);
    }
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const matching = (name: string, pattern: RegExp) => inputs[name]!.filter((file) => pattern.test(file));
  const TOKEN_VERIFIER = /node_modules\/jose\/|lambdas\/auth\//;
  const REQUEST_PARTS = /lambdas\/(engine\/engine|mcp\/tool-runtime|runtime\/services|runtime\/operation-id-secret)\.ts$/;
  const DOWNSTREAM_CLIENTS = /reference\/downstream\/|@aws-sdk\/client-sesv2\//;

  it('no worker carries the token verifier, the engine or the signers', () => {
    for (const name of Object.keys(entries)) {
      expect(inputs[name]!.length, name).toBeGreaterThan(20);
      expect(matching(name, TOKEN_VERIFIER), name).toEqual([]);
    }
    for (const name of ['relay', 'demo consumer', "a team's consumer"]) expect(matching(name, REQUEST_PARTS), name).toEqual([]);
  });

  it("the relay and a team's workers carry no downstream client; the demo's carry only those their deliveries and hooks call", () => {
    for (const name of ['relay', "a team's consumer", "a team's reconciler"]) expect(matching(name, DOWNSTREAM_CLIENTS), name).toEqual([]);
    expect(
      matching('demo consumer', DOWNSTREAM_CLIENTS)
        .filter((file) => file.endsWith('.ts'))
        .sort(),
    ).toEqual([
      'reference/downstream/email.ts',
      'reference/downstream/http.ts',
      'reference/downstream/index.ts',
      'reference/downstream/ses-email.ts',
      'reference/downstream/tickets.ts',
    ]);
    // request_payment's reconcile hook asks the payments provider; nothing sends email or opens tickets here.
    expect(matching('demo reconciler', DOWNSTREAM_CLIENTS).sort()).toEqual([
      'reference/downstream/http.ts',
      'reference/downstream/index.ts',
      'reference/downstream/payments.ts',
    ]);
  });
});
