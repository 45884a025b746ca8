import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { synthTeamApp } from '../cdk/support';
import { rawToolCall, rawToolsList, type RawToolAnswer } from '../support/mcp';
import { LocalDeployment } from './local-deploy';
import { node22 } from '../support/node22';
import { artifactChecks, cfnLint, tenantToken } from './support';

const STACK = 'MyTeamEndpoint';

/**
 * A team's endpoint (examples/cdk-app, synthesized by its own app as a team runs it) deployed from cdk.out into a
 * local account, as test/artifact/reference-stack.test.ts does for the reference stack: its tools called through the
 * Function URL with a token of an app client the team created in the pool, its outbox relayed and consumed, its
 * reconciler run on its schedule, every AWS call checked against the role.
 */
describe("a team's endpoint (examples/cdk-app), deployed from cdk.out into a local account", () => {
  const outdir = mkdtempSync(join(tmpdir(), 'artifact-team-'));
  let deployment: LocalDeployment;
  let lint: Promise<string[]>;
  let mcpUrl: string;
  let token: string;

  beforeAll(async () => {
    const node = node22();
    await synthTeamApp(outdir);
    lint = cfnLint(join(outdir, `${STACK}.template.json`));
    lint.catch(() => {});
    deployment = await LocalDeployment.deploy(outdir, STACK, { node, dynamodbEndpoint: inject('dynamodbEndpoint') });
    const d = deployment.deployed;
    mcpUrl = String(d.resolve(d.template.Outputs!.McpUrl!.Value));
    // The team's first tenant: an app client it creates in the pool (client credentials, the tools scope).
    token = await tenantToken(deployment, 'team-tenant-1', 'team-secret');
  }, 480_000);

  afterAll(async () => {
    await deployment?.stop();
    rmSync(outdir, { recursive: true, force: true });
  });

  const call = (name: string, args: Record<string, unknown>) => rawToolCall(mcpUrl, token, name, args);
  const structured = (answer: RawToolAnswer) => answer.structuredContent as Record<string, any>;

  it("serves the team's tools and the toolkit's, each write once per key", async () => {
    const tools = (await rawToolsList(mcpUrl, token)).map((tool) => tool.name).sort();
    // No tool of the team takes a server-issued operation id: no issue_operation_id.
    expect(tools).toEqual(['get_operation_status', 'rooms.announce', 'rooms.reserve']);

    const key = `reserve-${randomUUID()}`;
    const args = { room: 'berlin-3', starts_at: '2027-01-05T10:00:00Z', minutes: 30, idempotency_key: key };
    const [first, again] = [await call('rooms.reserve', args), await call('rooms.reserve', args)];
    expect(structured(first)).toMatchObject({ outcome: 'succeeded', replayed: false });
    expect(structured(again)).toMatchObject({ outcome: 'succeeded', replayed: true, result: structured(first).result });
    const announceKey = `announce-${randomUUID()}`;
    const announce = {
      reservation_id: structured(first).result.reservation_id,
      text: 'Berlin-3 is ours at ten',
      idempotency_key: announceKey,
    };
    const [queued, queuedAgain] = [await call('rooms.announce', announce), await call('rooms.announce', announce)];
    expect(structured(queued)).toMatchObject({ outcome: 'succeeded', replayed: false, result: { status: 'queued' } });
    expect(structured(queuedAgain)).toMatchObject({ outcome: 'succeeded', replayed: true, result: structured(queued).result });
    for (let read = 0; read < 2; read++)
      expect(structured(await call('get_operation_status', { tool: 'rooms.announce', idempotency_key: announceKey }))).toMatchObject({
        tool: 'rooms.announce',
      });
  }, 120_000);

  it("answers at the approval page's routes (a link nobody issued)", async () => {
    const page = String(
      deployment.deployed.resolve(
        deployment.template.Outputs?.ApprovalPageUrl?.Value ??
          `${deployment.deployed.attributes.get(`${deployment.deployed.ofType('AWS::ApiGatewayV2::Api')[0]![0]}.ApiEndpoint`)}/approvals`,
      ),
    );
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

  it('runs the reconciler on its schedule', async () => {
    for (const rule of deployment.triggersOf('EventBridge schedule')) expect(await deployment.runSchedule(rule.id)).toBeTruthy();
  }, 60_000);

  it('relays the announcement to the queue; the consumer retries the unreachable chat until its budget is spent, then dead-letters it', async () => {
    const [stream] = deployment.triggersOf('DynamoDB stream event source');
    expect((await deployment.pumpStream(stream!.id)).invoked).toBeGreaterThan(0);
    const [queue] = deployment.triggersOf('SQS event source');
    const first = await deployment.pumpQueue(queue!.id);
    expect(first).toMatchObject({ messages: 1, failures: 1 });
    await deployment.advanceClock(25 * 3600_000);
    expect(await deployment.pumpQueue(queue!.id)).toMatchObject({ messages: 1, failures: 0 });
    const dlq = deployment.account.queueUrls.get(
      String(
        deployment.deployed.resolve({
          Ref: deployment.deployed.ofType('AWS::SQS::Queue').find(([, q]) => !q.Properties?.RedrivePolicy)![0],
        }),
      ),
    )!;
    const sqs = new SQSClient({
      endpoint: deployment.sqsEndpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'ops', secretAccessKey: 'ops' },
    });
    const dead = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq, MaxNumberOfMessages: 10 }));
    sqs.destroy();
    expect((dead.Messages ?? []).map((m) => JSON.parse(m.Body!).type)).toEqual(['room.announce']);
  }, 120_000);

  artifactChecks(
    () => deployment,
    () => lint,
  );
});
