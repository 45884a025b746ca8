import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Duration, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { build } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { lambdaBuildOptions } from '../../lib/bundling';
import { IdempotentMcpEndpoint, type IdempotentMcpEndpointProps } from 'idempotent-mcp/cdk';
import { IdempotentMcpChecks } from 'idempotent-mcp/cdk/nag';
import { PROJECT_ROOT } from '../../lib/constructs/service-function';
import { deliveriesFunctionEntry, toolsFunctionEntry } from '../../lib/tools-entry';
import { referenceMcpBundle } from './reference-bundle';
import { logicalId, statementsOfRole, teamProject, templateApp } from './support';

// The example's modules in a team's project (the synth bundles and loads them to check their exports).
const project = teamProject();
afterAll(() => project.remove());
const TOOLS = project.file('tools.ts');
const DELIVERIES = project.file('deliveries.ts');

function endpointStack(
  props: Partial<IdempotentMcpEndpointProps> = {},
  configure?: (stack: Stack) => Partial<IdempotentMcpEndpointProps>,
  use?: (endpoint: IdempotentMcpEndpoint, stack: Stack) => void,
) {
  const app = templateApp();
  const stack = new Stack(app, 'Team');
  const endpoint = new IdempotentMcpEndpoint(stack, 'Endpoint', { tools: TOOLS, ...props, ...configure?.(stack) });
  use?.(endpoint, stack);
  return { app, stack, endpoint, template: Template.fromStack(stack) };
}

describe("IdempotentMcpEndpoint: a team's tools on the whole endpoint", () => {
  const bucketRead = new iam.PolicyStatement({ actions: ['s3:GetObject'], resources: ['arn:aws:s3:::team-bucket/rooms.json'] });
  const { app, endpoint, template } = endpointStack({
    deliveries: DELIVERIES,
    environment: { ROOMS_CALENDAR: 'team' },
    grants: [bucketRead],
  });
  const resources = template.toJSON().Resources;
  const envOf = (fn: { node: { defaultChild?: unknown } }) => resources[logicalId(fn)].Properties.Environment.Variables;

  it('bundles the MCP function and the reconciler from the tools module, through the package handler factories', () => {
    for (const fn of ['mcp', 'reconciler'] as const) {
      const entry = readFileSync(toolsFunctionEntry(fn, TOOLS), 'utf8');
      expect(entry).toContain(`import * as toolsModule from ${JSON.stringify(TOOLS)};`);
      expect(entry).toContain(`${fn}LambdaHandler(toolsModule)`);
    }
    expect(Object.values(resources).filter((r: any) => r.Type === 'AWS::Lambda::Function')).toHaveLength(4);
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    template.resourceCountIs('AWS::Lambda::Url', 1);
    template.resourceCountIs('AWS::Events::Rule', 1);
  });

  it("gives the tools' settings and grants to the functions that run them, and only those", () => {
    expect(envOf(endpoint.mcpFunction)).toMatchObject({ ROOMS_CALENDAR: 'team', TABLE_NAME: expect.anything() });
    expect(envOf(endpoint.reconcilerFunction)).toMatchObject({ ROOMS_CALENDAR: 'team', RECONCILE_INTERVAL_MS: '60000' });
    expect(envOf(endpoint.consumerFunction!)).toMatchObject({ ROOMS_CALENDAR: 'team' });
    for (const fn of [endpoint.mcpFunction, endpoint.reconcilerFunction]) {
      expect(statementsOfRole(template, logicalId(fn.role!))).toContainEqual(expect.objectContaining({ Action: 's3:GetObject' }));
    }
    expect(statementsOfRole(template, logicalId(endpoint.relayFunction!.role!)).flatMap((s) => s.Action)).not.toContain('s3:GetObject');
  });

  it('is cdk-nag clean', () => {
    for (const pack of [new AwsSolutionsChecks(), new IdempotentMcpChecks()])
      expect(pack.validateScope(app).violations.map((v) => [v.ruleName, v.violatingResources.map((r) => r.constructPath)])).toEqual([]);
  });

  it('fails the synth naming the prop that is wrong', () => {
    expect(() => endpointStack({ tools: undefined as unknown as string })).toThrow(
      /IdempotentMcpEndpoint: tools must be the path of your tools module/,
    );
    expect(() => endpointStack({ tools: project.file('missing.ts') })).toThrow(/IdempotentMcpEndpoint: tools: no such file/);
    expect(() => endpointStack({ tools: project.file('cdk.json') })).toThrow(/IdempotentMcpEndpoint: tools must be a \.ts/);
    expect(() => endpointStack({ deliveries: '' })).toThrow(
      /IdempotentMcpEndpoint: deliveries must be the path of your deliveries module \(a \.ts or \.js file exporting `deliveries`\)/,
    );
    expect(() => endpointStack({ deliveries: project.file('missing.ts') })).toThrow(/IdempotentMcpEndpoint: deliveries: no such file/);
    expect(() => endpointStack({ environment: { TABLE_NAME: 'x' } })).toThrow(/environment\.TABLE_NAME is set by the endpoint itself/);
    expect(() => endpointStack({ environment: { 'bad-name': 'x' } })).toThrow(/environment\.bad-name is not a valid variable name/);
    expect(() => endpointStack({ reconcilePeriod: Duration.seconds(30) })).toThrow(/reconcilePeriod must be at least 1 minute/);
    expect(() => endpointStack({ allowedOrigins: ['https://app.example.com/path'] })).toThrow(
      /allowedOrigins has 'https:\/\/app\.example\.com\/path'/,
    );
  });
});

describe("a team's endpoint serves the team's tools only", () => {
  /** A function's bundle as esbuild builds it for the deploy (lib/bundling.ts), the subpaths resolving to the sources. */
  async function bundleOf(entry: string) {
    const result = await build({
      ...lambdaBuildOptions(),
      // Unminified: the test searches the code for names.
      minify: false,
      entryPoints: [entry],
      tsconfig: join(PROJECT_ROOT, 'tsconfig.json'),
      write: false,
      metafile: true,
      logLevel: 'error',
      outfile: 'index.mjs',
    });
    return { code: result.outputFiles[0]!.text, inputs: Object.keys(result.metafile.inputs) };
  }

  it("bundles no demo tool into the MCP function of a team's endpoint; the reference endpoint's carries them", async () => {
    const team = await bundleOf(toolsFunctionEntry('mcp', TOOLS));
    expect(team.code).toContain('rooms.reserve');
    expect(team.code).not.toContain('request_payment');
    expect(team.inputs.filter((file) => file.includes('reference/tools/'))).toEqual([]);

    // The reference endpoint's MCP bundle, as the deploy builds it (shared with test/cdk/bundle.test.ts).
    const reference = await referenceMcpBundle();
    expect(Object.keys(reference.metafile.inputs).filter((file) => file.includes('reference/tools/'))).not.toEqual([]);
    expect(readFileSync(reference.file, 'utf8')).toContain('request_payment');
  }, 120_000);
});

describe("a team's deliveries: its own event types, delivered by its own code", () => {
  it("bundles the deliveries module into the outbox consumer, which gets the team's settings and grants", () => {
    const grant = new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: ['arn:aws:s3:::team-bucket/*'] });
    const { endpoint, template } = endpointStack({
      deliveries: DELIVERIES,
      environment: { ROOMS_CHAT_WEBHOOK: 'https://chat.example' },
      grants: [grant],
    });
    const entry = readFileSync(deliveriesFunctionEntry(DELIVERIES, TOOLS), 'utf8');
    expect(entry).toContain(`import * as deliveriesModule from ${JSON.stringify(DELIVERIES)};`);
    expect(entry).toContain('consumerLambdaHandler(deliveriesModule)');
    const resources = template.toJSON().Resources;
    expect(resources[logicalId(endpoint.consumerFunction!)].Properties.Environment.Variables).toMatchObject({
      ROOMS_CHAT_WEBHOOK: 'https://chat.example',
    });
    expect(statementsOfRole(template, logicalId(endpoint.consumerFunction!.role!))).toContainEqual(
      expect.objectContaining({ Action: 's3:PutObject' }),
    );
  });
});

describe('an endpoint without deliveries has no outbox', () => {
  const { endpoint, template } = endpointStack();
  const resources = template.toJSON().Resources;
  const envOf = (fn: { node: { defaultChild?: unknown } }) => resources[logicalId(fn)].Properties.Environment.Variables;

  it('deploys no queue, dead-letter queue, relay, consumer or table stream', () => {
    template.resourceCountIs('AWS::SQS::Queue', 0);
    template.resourceCountIs('AWS::Lambda::EventSourceMapping', 0);
    template.resourceCountIs('AWS::Lambda::Function', 2);
    expect(Object.values<any>(template.findResources('AWS::DynamoDB::Table'))[0].Properties.StreamSpecification).toBeUndefined();
    expect([endpoint.queue, endpoint.deadLetterQueue, endpoint.relayFunction, endpoint.consumerFunction]).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect(Object.keys(template.findResources('AWS::CloudWatch::Alarm')).filter((id) => id.includes('DeadLetter'))).toEqual([]);
  });

  it('tells its functions the outbox is off (a tool that queues is refused), with no queue to send to', () => {
    for (const fn of [endpoint.mcpFunction, endpoint.reconcilerFunction]) {
      expect(envOf(fn)).toMatchObject({ OUTBOX: 'off' });
      expect(envOf(fn)).not.toHaveProperty('OUTBOX_QUEUE_URL');
    }
    const withOutbox = endpointStack({ deliveries: DELIVERIES });
    const withEnv = withOutbox.template.toJSON().Resources[logicalId(withOutbox.endpoint.mcpFunction)].Properties.Environment.Variables;
    expect(withEnv).not.toHaveProperty('OUTBOX');
  });

  it('refuses settings of functions it does not have', () => {
    expect(() => endpointStack({ functions: { consumer: { memorySize: 1024 } } })).toThrow(
      /functions\.consumer is set, but the endpoint has no consumer without a deliveries module/,
    );
  });
});

describe('a tools module that does not export its tools is refused at synth, not at cold start', () => {
  const write = (name: string, source: string) => {
    writeFileSync(project.file(name), source);
    return project.file(name);
  };

  it('names the module and what it lacks, in one sentence', () => {
    const noTools = write('no-tools.ts', "export const tool = [{ name: 'x' }];\n");
    expect(() => endpointStack({ tools: noTools })).toThrow(
      new RegExp(
        `^IdempotentMcpEndpoint: tools module ${noTools.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is refused: the tools module must export \`tools\`: an array of defineWriteTool / defineReadTool results$`,
      ),
    );
    const notTools = write('not-tools.ts', "export const tools = ['create_order'];\n");
    expect(() => endpointStack({ tools: notTools })).toThrow(/not-tools\.ts is refused: the tools module must export `tools`/);
    const badClients = write('bad-clients.ts', "export { tools } from './tools';\nexport const withClients = { invoices: 1 };\n");
    expect(() => endpointStack({ tools: badClients })).toThrow(
      /bad-clients\.ts is refused: the tools module exports `withClients`, but not as a function/,
    );
  });

  it('refuses a module that does not build, and a deliveries module without deliver()', () => {
    const broken = write('broken.ts', "import { nothing } from './nowhere';\nexport const tools = [nothing];\n");
    expect(() => endpointStack({ tools: broken })).toThrow(/tools module .*broken\.ts does not build: Could not resolve "\.\/nowhere"/);
    const noDeliver = write('no-deliver.ts', "export const deliveries = { 'room.announce': { verify: async () => undefined } };\n");
    expect(() => endpointStack({ deliveries: noDeliver })).toThrow(
      /deliveries module .*no-deliver\.ts is refused: the deliveries module must export `deliveries`: a handler with deliver\(\)/,
    );
  });

  it('loads the module in a child process with the settings the functions get, and only warns when it cannot load there', () => {
    const needsSetting = write(
      'needs-setting.ts',
      "if (!process.env.ROOMS_CALENDAR) throw new Error('ROOMS_CALENDAR must be set');\nexport { tools } from './tools';\n",
    );
    expect(() => endpointStack({ tools: needsSetting, environment: { ROOMS_CALENDAR: 'team' } })).not.toThrow();
    expect(process.env.ROOMS_CALENDAR).toBeUndefined();
    const { stack } = endpointStack({ tools: needsSetting });
    const warnings = Annotations.fromStack(stack).findWarning(
      '*',
      Match.stringLikeRegexp(
        'needs-setting\\.ts did not load at synth, so its exports are checked at cold start only: ROOMS_CALENDAR must be set',
      ),
    );
    expect(warnings).toHaveLength(1);
  });

  it('loads a module once per environment: a later synth of either reuses its check while none of its files changed', () => {
    // The module counts its own loads (its top-level code runs in the check's child process only).
    const loads = project.file('loads.txt');
    writeFileSync(loads, '');
    const counted = write(
      'counted.ts',
      "import { appendFileSync } from 'node:fs';\nappendFileSync(process.env.ROOMS_LOADS!, `${process.env.ROOMS_VARIANT}\\n`);\nexport { tools } from './tools';\n",
    );
    for (const variant of ['a', 'b', 'a', 'b'])
      endpointStack({ tools: counted, environment: { ROOMS_LOADS: loads, ROOMS_VARIANT: variant } });
    expect(readFileSync(loads, 'utf8').split('\n').filter(Boolean)).toEqual(['a', 'b']);
  });
});

describe('an existing table', () => {
  const STREAM = 'arn:aws:dynamodb:eu-west-1:111122223333:table/team-records/stream/2026-01-01T00:00:00.000';
  const imported = (stack: Stack, stream = true) =>
    dynamodb.Table.fromTableAttributes(stack, 'Records', { tableName: 'team-records', ...(stream ? { tableStreamArn: STREAM } : {}) });

  it('is used instead of a new one: the grants and the relay point at it', () => {
    const { endpoint, template } = endpointStack({ deliveries: DELIVERIES }, (stack) => ({ existingTable: imported(stack) }));
    template.resourceCountIs('AWS::DynamoDB::Table', 0);
    expect(endpoint.table.tableName).toBe('team-records');
    const resources = template.toJSON().Resources;
    expect(resources[logicalId(endpoint.mcpFunction)].Properties.Environment.Variables.TABLE_NAME).toBe('team-records');
    expect(JSON.stringify(statementsOfRole(template, logicalId(endpoint.mcpFunction.role!)))).toContain(':table/team-records');
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { EventSourceArn: STREAM });
  });

  it("with tableKeyPrefix: its functions get it, and its relay's stream filter passes only its own outbox events", () => {
    const { endpoint, template } = endpointStack({ deliveries: DELIVERIES, tableKeyPrefix: 'rooms:' }, (stack) => ({
      existingTable: imported(stack),
    }));
    const resources = template.toJSON().Resources;
    for (const fn of [endpoint.mcpFunction, endpoint.reconcilerFunction, endpoint.relayFunction!, endpoint.consumerFunction!])
      expect(resources[logicalId(fn)].Properties.Environment.Variables.TABLE_KEY_PREFIX).toBe('rooms:');
    const patterns = Object.values(template.findResources('AWS::Lambda::EventSourceMapping')).flatMap((mapping) =>
      (mapping.Properties.FilterCriteria?.Filters ?? []).map((filter: { Pattern: string }) => JSON.parse(filter.Pattern)),
    );
    // Another endpoint's events on the table (pk `OUTBOX#…`, or `<its prefix>OUTBOX#…`) never reach this relay.
    expect(patterns).toEqual([
      { eventName: ['INSERT'], dynamodb: { Keys: { pk: { S: [{ prefix: 'rooms:OUTBOX#' }] }, sk: { S: ['EVENT'] } } } },
    ]);
    expect(() => endpointStack({ tableKeyPrefix: 'rooms#' })).toThrow(/tableKeyPrefix may contain only letters, digits and _ \. : -/);
  });

  it("is refused with deliveries when its stream is not given, and with the new table's settings", () => {
    expect(() => endpointStack({ deliveries: DELIVERIES }, (stack) => ({ existingTable: imported(stack, false) }))).toThrow(
      /existingTable needs its stream \(NEW_IMAGE\) with deliveries/,
    );
    expect(() => endpointStack({}, (stack) => ({ existingTable: imported(stack, false) }))).not.toThrow();
    expect(() => endpointStack({ customerManagedKey: true }, (stack) => ({ existingTable: imported(stack) }))).toThrow(
      /customerManagedKey cannot be set with existingTable/,
    );
  });
});

describe('function settings, per function', () => {
  it('sets memory, timeout, reserved concurrency and architecture of each function on its own', () => {
    const { endpoint, template } = endpointStack({
      deliveries: DELIVERIES,
      functions: {
        mcp: {
          memorySize: 2048,
          timeout: Duration.seconds(20),
          reservedConcurrentExecutions: 10,
          architecture: lambda.Architecture.X86_64,
        },
        consumer: { timeout: Duration.seconds(120), reservedConcurrentExecutions: 5 },
      },
    });
    const props = (fn: { node: { defaultChild?: unknown } }) => template.toJSON().Resources[logicalId(fn)].Properties;
    expect(props(endpoint.mcpFunction)).toMatchObject({
      MemorySize: 2048,
      Timeout: 20,
      ReservedConcurrentExecutions: 10,
      Architectures: ['x86_64'],
    });
    expect(props(endpoint.consumerFunction!)).toMatchObject({
      MemorySize: 512,
      Timeout: 120,
      ReservedConcurrentExecutions: 5,
      Architectures: ['arm64'],
    });
    expect(props(endpoint.reconcilerFunction)).toMatchObject({ MemorySize: 512, Timeout: 50, Architectures: ['arm64'] });
    expect(props(endpoint.reconcilerFunction)).not.toHaveProperty('ReservedConcurrentExecutions');
    // The queue keeps a message invisible for six consumer timeouts.
    template.hasResourceProperties('AWS::SQS::Queue', { VisibilityTimeout: 720 });
  });

  it('refuses values Lambda or the outbox cannot take, naming the function and the setting', () => {
    expect(() => endpointStack({ functions: { mcp: { memorySize: 64 } } })).toThrow(
      /functions\.mcp\.memorySize must be a whole number of MB from 128 to 10240/,
    );
    expect(() => endpointStack({ functions: { reconciler: { timeout: Duration.minutes(20) } } })).toThrow(
      /functions\.reconciler\.timeout must be from 1 second to 15 minutes/,
    );
    expect(() => endpointStack({ functions: { mcp: { reservedConcurrentExecutions: 0 } } })).toThrow(
      /functions\.mcp\.reservedConcurrentExecutions must be a whole number of at least 1/,
    );
    expect(() => endpointStack({ deliveries: DELIVERIES, functions: { consumer: { reservedConcurrentExecutions: 2 } } })).toThrow(
      /reservedConcurrentExecutions must be at least its maxConcurrency \(5\)/,
    );
    expect(() => endpointStack({ functions: { worker: {} } as never })).toThrow(/functions\.worker is not one of the endpoint's functions/);
  });
});

describe('in a VPC', () => {
  it('runs every function in the given subnets and security groups, with the network-interface permissions, nag clean', () => {
    let vpc!: ec2.Vpc;
    let group!: ec2.SecurityGroup;
    const { app, endpoint, template } = endpointStack({ deliveries: DELIVERIES }, (stack) => {
      vpc = new ec2.Vpc(stack, 'Vpc', {
        maxAzs: 2,
        natGateways: 1,
        subnetConfiguration: [
          { name: 'public', subnetType: ec2.SubnetType.PUBLIC },
          { name: 'app', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
        ],
      });
      group = new ec2.SecurityGroup(stack, 'Functions', { vpc, description: 'endpoint functions' });
      return { vpc, vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS }, securityGroups: [group] };
    });
    const resources = template.toJSON().Resources;
    const subnets = vpc.privateSubnets.map((s) => ({ Ref: logicalId(s.node.defaultChild as never) }));
    for (const fn of [endpoint.mcpFunction, endpoint.reconcilerFunction, endpoint.consumerFunction!, endpoint.relayFunction!]) {
      expect(resources[logicalId(fn)].Properties.VpcConfig).toEqual({
        SubnetIds: subnets,
        SecurityGroupIds: [{ 'Fn::GetAtt': [logicalId(group), 'GroupId'] }],
      });
      const role = resources[logicalId((fn as lambda.Function).role as iam.Role)];
      expect(JSON.stringify(role.Properties.ManagedPolicyArns)).toContain('service-role/AWSLambdaVPCAccessExecutionRole');
    }
    for (const pack of [new AwsSolutionsChecks(), new IdempotentMcpChecks()]) {
      expect(
        pack
          .validateScope(app)
          .violations.filter((v) => v.violatingResources.some((r) => r.constructPath?.includes('/Endpoint/')))
          .map((v) => v.ruleName),
      ).toEqual([]);
    }
  });

  it('refuses subnets or security groups without a VPC', () => {
    expect(() => endpointStack({ vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_ISOLATED } })).toThrow(
      /vpcSubnets and securityGroups need a vpc/,
    );
  });
});

/** The endpoint's functions a team grants to, by name. */
const functionsOf = (endpoint: IdempotentMcpEndpoint) => ({
  mcp: endpoint.mcpFunction,
  reconciler: endpoint.reconcilerFunction,
  consumer: endpoint.consumerFunction!,
  relay: endpoint.relayFunction!,
});

describe('grants for the people and roles around the endpoint', () => {
  let ops!: iam.Role;
  let reviewer!: iam.Role;
  const { endpoint, template: after } = endpointStack({ deliveries: DELIVERIES }, undefined, (endpoint, stack) => {
    ops = new iam.Role(stack, 'Ops', { assumedBy: new iam.AccountRootPrincipal() });
    reviewer = new iam.Role(stack, 'Reviewer', { assumedBy: new iam.AccountRootPrincipal() });
    endpoint.grantReadRecords(ops);
    endpoint.grantReview(reviewer);
    // What a team's code calls, granted to each function that runs it, one object per function.
    for (const [name, fn] of Object.entries(functionsOf(endpoint))) {
      iam.Grant.addToPrincipal({ grantee: fn, actions: ['s3:GetObject'], resourceArns: [`arn:aws:s3:::team-bucket/${name}`] });
    }
  });
  const tableArn = { 'Fn::GetAtt': [logicalId(endpoint.table as dynamodb.Table), 'Arn'] };
  const actionsOn = (role: iam.Role) =>
    statementsOfRole(after, logicalId(role)).map((s) => ({ actions: ([] as string[]).concat(s.Action).sort(), resource: s.Resource }));

  it('grantReadRecords: single-item reads of the table and Query on the attention index, nothing else', () => {
    expect(actionsOn(ops)).toEqual([
      { actions: ['dynamodb:GetItem'], resource: tableArn },
      { actions: ['dynamodb:Query'], resource: { 'Fn::Join': ['', [tableArn, '/index/attention']] } },
    ]);
  });

  it("grantReview: the reads, the decisions' fenced writes, and the redrive from the dead-letter queue to the queue", () => {
    const statements = actionsOn(reviewer);
    const all = statements.flatMap((s) => s.actions);
    expect(all).toEqual(
      expect.arrayContaining([
        'dynamodb:GetItem',
        'dynamodb:Query',
        'dynamodb:PutItem',
        'dynamodb:UpdateItem',
        'dynamodb:DeleteItem',
        'sqs:ReceiveMessage',
        'sqs:DeleteMessage',
        'sqs:SendMessage',
      ]),
    );
    expect(all.filter((a) => a === 'dynamodb:Scan' || a.endsWith('*'))).toEqual([]);
    const receive = statements.find((s) => s.actions.includes('sqs:ReceiveMessage'))!;
    expect(receive.resource).toEqual({ 'Fn::GetAtt': [logicalId(endpoint.deadLetterQueue!), 'Arn'] });
    const send = statements.find((s) => s.actions.includes('sqs:SendMessage'))!;
    expect(send.resource).toEqual({ 'Fn::GetAtt': [logicalId(endpoint.queue!), 'Arn'] });
  });

  it("exposes each function, to grant it what the team's code calls: the grant reaches the role that function runs as, and no other", () => {
    const resources = after.toJSON().Resources;
    // The role in the function's own template properties: the one its code runs as.
    const bucketObjects = (functionId: string) =>
      statementsOfRole(after, resources[functionId].Properties.Role['Fn::GetAtt'][0])
        .flatMap((s) => ([] as unknown[]).concat(s.Resource))
        .filter((r) => String(r).startsWith('arn:aws:s3:::team-bucket/'));
    for (const [name, fn] of Object.entries(functionsOf(endpoint))) {
      expect(bucketObjects(logicalId(fn)), name).toEqual([`arn:aws:s3:::team-bucket/${name}`]);
    }
  });
});
