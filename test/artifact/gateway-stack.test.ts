import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Stack } from 'aws-cdk-lib';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { IdempotentMcpGateway } from '../../lib/gateway-construct';
import { templateApp } from '../cdk/support';
import { rawToolCall, rawToolsList, type RawToolAnswer } from '../support/mcp';
import { BillingUpstream } from './billing-upstream';
import { LocalDeployment } from './local-deploy';
import { node22 } from '../support/node22';
import { artifactChecks, cfnLint, tenantToken } from './support';

const STACK = 'ArtifactGateway';
const HOUR = 3600_000;

/**
 * The gateway as `cdk deploy` ships it (IdempotentMcpGateway: its functions bundled by the local esbuild), deployed
 * from cdk.out into a local account (test/artifact/local-deploy.ts) in front of a team's billing server that does not
 * deduplicate, over https on loopback: its MCP function driven through the Function URL, its reconciler through the
 * schedule, the approval page's routes, every AWS call checked against the calling function's role. The gateway's
 * upstream credentials are the stack's secret, read by the functions with their roles.
 */
const policy = {
  tools: {
    charge: {
      kind: 'write',
      timeoutMs: 1500,
      inFlightWindowMs: 2000,
      reconcile: { tool: 'list_charges', arguments: { customer: '{{customer}}' }, found: { textIncludes: '{{note}}' } },
    },
    list_charges: { kind: 'read' },
  },
};
const CREDENTIALS = JSON.stringify({ tenants: { '*': { header: { name: 'Authorization', value: 'Bearer gateway-at-billing' } } } });

describe('the gateway (IdempotentMcpGateway), deployed from cdk.out into a local account', () => {
  mkdirSync(join(PROJECT_ROOT, '.scratch'), { recursive: true });
  // Inside the project, as a team's policy file is: the generated tools module is written beside its project.
  const dir = mkdtempSync(join(PROJECT_ROOT, '.scratch', 'artifact-gateway-'));
  const outdir = join(dir, 'cdk.out');
  const upstream = new BillingUpstream();
  let deployment: LocalDeployment;
  let lint: Promise<string[]>;
  let mcpUrl: string;
  let token: string;
  let secretArn: string;

  beforeAll(async () => {
    const node = node22();
    const tls = await BillingUpstream.certificate(dir);
    await upstream.start(tls);
    const policyFile = join(dir, 'gateway-policy.json');
    writeFileSync(policyFile, JSON.stringify(policy));

    const app = templateApp({}, { bundle: true, outdir });
    const stack = new Stack(app, STACK);
    const credentials = new secretsmanager.Secret(stack, 'UpstreamCredentials', {
      description: "The gateway's upstream credentials by tenant",
    });
    new IdempotentMcpGateway(stack, 'Gateway', { policy: policyFile, upstream: { url: upstream.url }, credentials });
    app.synth();
    lint = cfnLint(join(outdir, `${STACK}.template.json`));
    lint.catch(() => {});

    deployment = await LocalDeployment.deploy(outdir, STACK, {
      node,
      dynamodbEndpoint: inject('dynamodbEndpoint'),
      machineEnv: { NODE_EXTRA_CA_CERTS: tls.cert },
    });
    const d = deployment.deployed;
    // The secret's value is the team's (the vendor's credentials), put there after the stack made it.
    secretArn = d.refs.get(stack.getLogicalId(credentials.node.defaultChild as never))!;
    deployment.account.addSecret(secretArn, CREDENTIALS);
    mcpUrl = String(d.resolve(d.template.Outputs!.McpUrl!.Value));
    // A tenant: an app client made in the stack's pool (client credentials, the tools scope).
    token = await tenantToken(deployment, 'billing-tenant', 'tenant-secret');
  }, 480_000);

  afterAll(async () => {
    await deployment?.stop();
    await upstream.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>) => rawToolCall(mcpUrl, token, name, args);
  const structured = (answer: RawToolAnswer) => answer.structuredContent as Record<string, any>;
  const fn = (kind: 'Mcp' | 'Reconciler') => [...deployment.functions.keys()].find((id) => id.includes(kind) && !id.includes('Approval'))!;
  const callsOf = (functionId: string, from = 0) => deployment.account.calls.slice(from).filter((c) => c.functionId === functionId);
  const listTools = () => rawToolsList(mcpUrl, token);
  const charge = (note: string, key = `charge-${randomUUID()}`, extra: Record<string, unknown> = {}) =>
    call('charge', { customer: 'cus_1', amount_cents: 1250, note, idempotency_key: key, ...extra });
  const booked = (note: string) => upstream.charges.filter((c) => c.note === note);

  it("lists the upstream's tools under the policy; the MCP function's cold start read tools/list once, with the secret's credential, and kept it", async () => {
    const tools = await listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['charge', 'get_operation_status', 'list_charges']);
    expect(upstream.count('tools/list')).toBe(1);
    // The MCP function wrote the kept listing (PutItem, granted for its claims); checked against its role like every call.
    expect(callsOf(fn('Mcp')).filter((c) => c.action === 'dynamodb:PutItem' && c.decision === 'Allowed').length).toBeGreaterThan(0);
    expect([...upstream.authorizations]).toEqual(['Bearer gateway-at-billing']);
  }, 120_000);

  it("charges once per key and replays; the upstream sees the gateway's credential, never the agent's token", async () => {
    const note = `once ${randomUUID()}`;
    const key = `charge-${randomUUID()}`;
    const [first, again] = [await charge(note, key), await charge(note, key)];
    expect(structured(first)).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(structured(again)).toMatchObject({ outcome: 'succeeded', replayed: true, result: structured(first).result });
    expect(booked(note)).toHaveLength(1);
    expect(booked(note)[0]!.authorization).toBe('Bearer gateway-at-billing');
    expect([...upstream.authorizations]).toEqual(['Bearer gateway-at-billing']);
    const read = await call('list_charges', { customer: 'cus_1' });
    expect(JSON.stringify(read.content)).toContain(note);
  }, 120_000);

  it("the reconciler's cold start uses the kept tools/list: no upstream read, no secret read, no item written", async () => {
    const before = deployment.account.calls.length;
    const [rule] = deployment.triggersOf('EventBridge schedule');
    await deployment.runSchedule(rule!.id);
    expect(upstream.count('tools/list')).toBe(1);
    const reconciler = callsOf(fn('Reconciler'), before);
    expect(reconciler.map((c) => c.action)).toContain('dynamodb:GetItem');
    expect(reconciler.filter((c) => c.action === 'secretsmanager:GetSecretValue' || c.action === 'dynamodb:PutItem')).toEqual([]);
  }, 120_000);

  it("a charge whose answer is lost is unknown, then settled by the scheduled reconciler's lookup at the upstream: one charge", async () => {
    const note = `answer-late ${randomUUID()}`;
    const key = `charge-${randomUUID()}`;
    expect(structured(await charge(note, key))).toMatchObject({ outcome: 'unknown' });
    // The late answer arrives at the upstream's own pace; the lookup is asked once the in-flight window has passed.
    let settled: Record<string, any> = {};
    for (let run = 0; run < 6 && settled.outcome !== 'succeeded'; run++) {
      await deployment.advanceClock(60_000);
      await deployment.runSchedule(deployment.triggersOf('EventBridge schedule')[0]!.id);
      settled = structured(await charge(note, key));
    }
    expect(settled).toMatchObject({ outcome: 'succeeded', replayed: true, result: { settledByLookup: true } });
    expect(booked(note)).toHaveLength(1);
    // The reconciler read the credential with its own role to ask the upstream.
    expect(callsOf(fn('Reconciler')).some((c) => c.action === 'secretsmanager:GetSecretValue' && c.decision === 'Allowed')).toBe(true);
  }, 120_000);

  it('a credential that cannot be had: UPSTREAM_CREDENTIAL_UNAVAILABLE, retryable, nothing sent, the key free; once it can, the same key charges once', async () => {
    // A new container (a cold start: the kept listing, no secret read), then the secret is gone.
    deployment.functions.get(fn('Mcp'))!.stop();
    deployment.account.deleteSecret(secretArn);
    const note = `no-credential ${randomUUID()}`;
    const key = `charge-${randomUUID()}`;
    const answer = structured(await charge(note, key));
    expect(answer).toMatchObject({ outcome: 'failed', retryable: true, error: { code: 'UPSTREAM_CREDENTIAL_UNAVAILABLE' } });
    expect(answer.error.message).toMatch(
      /could not be read from Secrets Manager: ResourceNotFoundException.*nothing was sent\. Call again with the same key\./,
    );
    expect(booked(note)).toHaveLength(0);
    // A read says the same, not that the tenant has no credential.
    const read = await call('list_charges', { customer: 'cus_1' });
    expect(read.isError).toBe(true);
    expect(JSON.stringify(read.content)).toContain('UPSTREAM_CREDENTIAL_UNAVAILABLE');

    deployment.account.addSecret(secretArn, CREDENTIALS);
    expect(structured(await charge(note, key))).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(booked(note)).toHaveLength(1);

    // The kept listing stale (past its hour) and the secret gone again: the cold start cannot read the upstream's
    // list, serves the stale one, and a write still answers the cause (not a failed init, every call a 5xx).
    deployment.account.deleteSecret(secretArn);
    await deployment.advanceClock(HOUR);
    deployment.functions.get(fn('Mcp'))!.stop();
    const listed = upstream.count('tools/list');
    const later = `no-credential-stale ${randomUUID()}`;
    const laterKey = `charge-${randomUUID()}`;
    expect(structured(await charge(later, laterKey))).toMatchObject({
      outcome: 'failed',
      retryable: true,
      error: { code: 'UPSTREAM_CREDENTIAL_UNAVAILABLE' },
    });
    expect(booked(later)).toHaveLength(0);
    // Restored: the next cold start reads the upstream's list and keeps it fresh; the same key charges once.
    deployment.account.addSecret(secretArn, CREDENTIALS);
    deployment.functions.get(fn('Mcp'))!.stop();
    expect(structured(await charge(later, laterKey))).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(upstream.count('tools/list')).toBe(listed + 1);
    expect(booked(later)).toHaveLength(1);
  }, 120_000);

  it("when the upstream's tools change: the kept listing serves cold starts for its hour (a new argument refused, nothing sent); the first cold start after reads and keeps the new one", async () => {
    upstream.withCurrency = true;
    const listed = upstream.count('tools/list');
    deployment.functions.get(fn('Mcp'))!.stop();
    const kept = (await listTools()).find((tool) => tool.name === 'charge')!;
    expect(Object.keys(kept.inputSchema.properties)).not.toContain('currency');
    expect(upstream.count('tools/list')).toBe(listed);
    const refusedNote = `in-eur ${randomUUID()}`;
    const refused = await charge(refusedNote, undefined, { currency: 'EUR' });
    expect(refused.isError).toBe(true);
    expect(booked(refusedNote)).toHaveLength(0);

    // The hour passed: the next cold start reads the upstream's new listing and keeps it.
    await deployment.advanceClock(HOUR);
    deployment.functions.get(fn('Mcp'))!.stop();
    const fresh = (await listTools()).find((tool) => tool.name === 'charge')!;
    expect(Object.keys(fresh.inputSchema.properties)).toContain('currency');
    expect(upstream.count('tools/list')).toBe(listed + 1);
    const note = `in-eur ${randomUUID()}`;
    expect(structured(await charge(note, undefined, { currency: 'EUR' }))).toMatchObject({ outcome: 'succeeded' });
    expect(booked(note)).toMatchObject([{ currency: 'EUR' }]);

    // The reconciler's next cold start takes the new listing from the table.
    const schedule = deployment.triggersOf('EventBridge schedule')[0]!.id;
    deployment.functions.get(fn('Reconciler'))!.stop();
    await deployment.runSchedule(schedule);
    expect(upstream.count('tools/list')).toBe(listed + 1);

    // Another hour: the reconciler's cold start finds no listing it may use and reads the upstream's, but keeps none
    // (read-only there: its role puts no item), so the MCP function's next cold start reads it too and keeps it.
    await deployment.advanceClock(HOUR);
    const before = deployment.account.calls.length;
    deployment.functions.get(fn('Reconciler'))!.stop();
    await deployment.runSchedule(schedule);
    expect(upstream.count('tools/list')).toBe(listed + 2);
    expect(
      callsOf(fn('Reconciler'), before).filter(
        (c) => c.action !== 'dynamodb:GetItem' && c.action !== 'dynamodb:Query' && c.action !== 'secretsmanager:GetSecretValue',
      ),
    ).toEqual([]);
    deployment.functions.get(fn('Mcp'))!.stop();
    expect((await listTools()).map((tool) => tool.name)).toContain('charge');
    expect(upstream.count('tools/list')).toBe(listed + 3);
    expect(callsOf(fn('Mcp'), before).some((c) => c.action === 'dynamodb:PutItem')).toBe(true);
  }, 120_000);

  it("answers at the approval page's routes (a link nobody issued)", async () => {
    const api = deployment.deployed.ofType('AWS::ApiGatewayV2::Api')[0];
    if (!api) return;
    const page = `${deployment.deployed.attributes.get(`${api[0]}.ApiEndpoint`)}/approvals`;
    expect((await fetch(page, { redirect: 'manual' })).status).toBeLessThan(500);
    for (const method of ['GET', 'POST']) {
      const response = await fetch(`${page}/unknown.link`, {
        method,
        redirect: 'manual',
        ...(method === 'POST' ? { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'decision=approve' } : {}),
      });
      expect(response.status, method).toBeLessThan(500);
    }
  }, 60_000);

  artifactChecks(
    () => deployment,
    () => lint,
  );
});
