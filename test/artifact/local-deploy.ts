import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient, type CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';
import { LocalAwsAccount, type Identity } from './aws-account';
import { CognitoStandIn } from './cognito';
import { EventSourcePollers } from './event-sources';
import { httpEvent, listen, respond } from './http-events';
import { LocalFunction } from './lambda-runtime';
import { ACCOUNT, DeployedTemplate, REGION, type CfnResource, type CfnTemplate } from './template';

/** A trigger the template declares, by its resource's logical id. */
export interface Trigger {
  id: string;
  type: string;
  functionId: string;
  /** What it is, for the report (`GET /approvals/{proxy+}`, `rate(1 minute)`...). */
  what: string;
  invocations: number;
}

/**
 * A synthesized stack deployed into a local account: its tables in DynamoDB Local, its queues on the local SQS
 * server, its user pool as a Cognito stand-in, every AWS::Lambda::Function running from its cdk.out asset under
 * the Node 22 binary with the template's handler, timeout and environment (Ref/GetAtt resolved), the AWS SDK's calls
 * reaching the emulators through the IAM-checking proxy with each function's own credentials, and every trigger the
 * template declares (Function URLs, HTTP API routes, event source mappings, schedules) driven as AWS drives it.
 */
export class LocalDeployment {
  readonly functions = new Map<string, LocalFunction>();
  readonly identities = new Map<string, Identity>();
  readonly triggers = new Map<string, Trigger>();
  readonly cognito = new CognitoStandIn();
  account!: LocalAwsAccount;
  deployed!: DeployedTemplate;
  /** How far every function's clock runs ahead (time moved forward). */
  clockOffsetMs = 0;
  private readonly servers: Server[] = [];
  /** Lambda's pollers of the event source mappings (event-sources.ts). */
  private readonly pollers = new EventSourcePollers(this);

  private stopSqs = async () => {};

  constructor(
    readonly outdir: string,
    readonly stackName: string,
    private readonly options: { node: string; dynamodbEndpoint: string; sqsEndpoint: string; machineEnv?: Record<string, string> },
  ) {}

  /**
   * Deploys the stack of `outdir` into a new local account, with a local SQS server of its own. `machineEnv`: more
   * of this machine's network for every function (NODE_EXTRA_CA_CERTS for a loopback https server), as the AWS
   * endpoints are.
   */
  static async deploy(
    outdir: string,
    stackName: string,
    options: { node: string; dynamodbEndpoint: string; machineEnv?: Record<string, string> },
  ): Promise<LocalDeployment> {
    const sqs = buildApp({ logger: false });
    const address = await sqs.listen({ port: 0, host: '127.0.0.1' });
    const deployment = new LocalDeployment(outdir, stackName, { ...options, sqsEndpoint: `http://127.0.0.1:${new URL(address).port}` });
    deployment.stopSqs = async () => {
      await sqs.close();
    };
    try {
      await deployment.start();
    } catch (err) {
      await deployment.stop();
      throw err;
    }
    return deployment;
  }

  get sqsEndpoint() {
    return this.options.sqsEndpoint;
  }

  get template(): CfnTemplate {
    return this.deployed.template;
  }

  async start() {
    const template: CfnTemplate = JSON.parse(readFileSync(join(this.outdir, `${this.stackName}.template.json`), 'utf8'));
    const assets = JSON.parse(readFileSync(join(this.outdir, `${this.stackName}.assets.json`), 'utf8')).files as Record<
      string,
      { source: { path: string } }
    >;
    await this.cognito.start();
    this.account = new LocalAwsAccount({ dynamodb: this.options.dynamodbEndpoint, sqs: this.options.sqsEndpoint });
    await this.account.start();

    // Front doors first: their addresses are attributes of the resources they stand for.
    const functionUrls: Record<string, string> = {};
    const httpApis: Record<string, string> = {};
    for (const [id, resource] of Object.entries(template.Resources)) {
      if (resource.Type === 'AWS::Lambda::Url')
        functionUrls[id] = await this.frontDoor((req, res) => this.functionUrlRequest(id, req, res));
      if (resource.Type === 'AWS::ApiGatewayV2::Api') httpApis[id] = await this.frontDoor((req, res) => this.httpApiRequest(id, req, res));
    }
    this.deployed = new DeployedTemplate(this.stackName, template, {
      awsProxy: this.account.endpoint,
      issuer: this.cognito.url,
      functionUrls,
      httpApis,
    });
    await this.provision();
    for (const [id, resource] of this.deployed.ofType('AWS::Lambda::Function')) this.createFunction(id, resource, assets);
    this.declareTriggers();
  }

  async stop() {
    for (const fn of this.functions.values()) fn.stop();
    for (const server of this.servers) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await this.account?.stop();
    await this.cognito.stop();
    await this.stopSqs();
  }

  private async frontDoor(handler: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<string> {
    const server = createServer((req, res) => {
      handler(req, res).catch((err: Error) => res.writeHead(500).end(`front door: ${err.message}`));
    });
    this.servers.push(server);
    return listen(server);
  }

  /** Tables, queues (with their redrive and policies), the secret, the user pool's clients. */
  private async provision() {
    const d = this.deployed;
    const ddb = new DynamoDBClient({
      endpoint: this.options.dynamodbEndpoint,
      region: REGION,
      credentials: { accessKeyId: 'deployer', secretAccessKey: 'deployer' },
    });
    for (const [id, table] of d.ofType('AWS::DynamoDB::Table')) {
      const p = d.resolve(table.Properties) as Record<string, any>;
      const input: CreateTableCommandInput = {
        TableName: d.refs.get(id)!,
        KeySchema: p.KeySchema,
        AttributeDefinitions: p.AttributeDefinitions,
        BillingMode: p.BillingMode ?? 'PROVISIONED',
        GlobalSecondaryIndexes: p.GlobalSecondaryIndexes,
        ...(p.BillingMode === 'PAY_PER_REQUEST' ? {} : { ProvisionedThroughput: p.ProvisionedThroughput }),
        ...(p.StreamSpecification
          ? { StreamSpecification: { StreamEnabled: true, StreamViewType: p.StreamSpecification.StreamViewType } }
          : {}),
      };
      const created = await ddb.send(new CreateTableCommand(input));
      if (created.TableDescription?.LatestStreamArn) d.attributes.set(`${id}.StreamArn`, created.TableDescription.LatestStreamArn);
    }
    ddb.destroy();

    const sqs = new SQSClient({
      endpoint: this.options.sqsEndpoint,
      region: REGION,
      credentials: { accessKeyId: 'deployer', secretAccessKey: 'deployer' },
    });
    // Dead-letter queues first: a queue's redrive policy names one.
    const queues = d.ofType('AWS::SQS::Queue').sort(([, a]) => (a.Properties?.RedrivePolicy ? 1 : -1));
    for (const [id, queue] of queues) {
      const p = d.resolve(queue.Properties ?? {}) as Record<string, any>;
      const attributes: Record<string, string> = {};
      for (const name of [
        'VisibilityTimeout',
        'MessageRetentionPeriod',
        'DelaySeconds',
        'ReceiveMessageWaitTimeSeconds',
        'MaximumMessageSize',
      ])
        if (p[name] !== undefined) attributes[name] = String(p[name]);
      if (p.RedrivePolicy) attributes.RedrivePolicy = JSON.stringify(p.RedrivePolicy);
      const created = await sqs.send(new CreateQueueCommand({ QueueName: d.attributes.get(`${id}.QueueName`)!, Attributes: attributes }));
      this.account.queueUrls.set(d.refs.get(id)!, created.QueueUrl!);
    }
    sqs.destroy();
    for (const [, policy] of d.ofType('AWS::SQS::QueuePolicy')) {
      const p = d.resolve(policy.Properties) as { PolicyDocument: any; Queues: string[] };
      for (const url of p.Queues)
        this.account.resourcePolicies.set(`arn:aws:sqs:${REGION}:${ACCOUNT}:${url.split('/').at(-1)}`, p.PolicyDocument);
    }
    for (const [id] of d.ofType('AWS::SecretsManager::Secret'))
      this.account.addSecret(d.refs.get(id)!, randomBytes(48).toString('base64url'));

    const pools = d.ofType('AWS::Cognito::UserPool');
    if (pools.length > 1) throw new Error('more than one user pool: the local deploy stands in for one');
    if (pools[0]) this.cognito.poolId = d.refs.get(pools[0][0])!;
    for (const [id, client] of d.ofType('AWS::Cognito::UserPoolClient')) {
      const p = d.resolve(client.Properties) as Record<string, any>;
      this.cognito.clients.set(d.refs.get(id)!, {
        clientId: d.refs.get(id)!,
        secret: p.GenerateSecret ? d.attributes.get(`${id}.ClientSecret`) : undefined,
        scopes: p.AllowedOAuthScopes ?? [],
        callbackUrls: p.CallbackURLs ?? [],
        flows: p.AllowedOAuthFlows ?? [],
      });
    }
  }

  /** The identity policies of a role: its inline policies and every AWS::IAM::Policy attached to it. */
  policiesOfRole(roleId: string): Identity['policies'] {
    const d = this.deployed;
    const role = d.template.Resources[roleId]!;
    if (role.Properties?.ManagedPolicyArns?.length)
      throw new Error(`${roleId} has managed policies: the local deploy knows no managed policy's document`);
    const policies = (role.Properties?.Policies ?? []).map((p: any) => ({ name: p.PolicyName, policy: d.resolve(p.PolicyDocument) }));
    for (const [id, policy] of d.ofType('AWS::IAM::Policy')) {
      const roles = (policy.Properties!.Roles ?? []).map((r: unknown) => DeployedTemplate.target(r));
      if (roles.includes(roleId)) policies.push({ name: id, policy: d.resolve(policy.Properties!.PolicyDocument) });
    }
    return policies;
  }

  private createFunction(id: string, resource: CfnResource, assets: Record<string, { source: { path: string } }>) {
    const d = this.deployed;
    const p = resource.Properties!;
    if (p.Runtime !== 'nodejs22.x') throw new Error(`${id} runs ${p.Runtime}: this harness runs nodejs22.x`);
    const hash = String(p.Code.S3Key).replace(/\.zip$/, '');
    const asset = assets[hash];
    if (!asset) throw new Error(`${id}: its code asset ${hash} is not in the assembly`);
    const roleId = DeployedTemplate.target(p.Role)!;
    const identity = this.account.addIdentity(id, d.resolve(p.Role), this.policiesOfRole(roleId));
    this.identities.set(id, identity);
    const variables = d.resolve(p.Environment?.Variables ?? {}) as Record<string, string>;
    const name = d.refs.get(id)!;
    const logGroup = p.LoggingConfig?.LogGroup ? String(d.resolve(p.LoggingConfig.LogGroup)) : `/aws/lambda/${name}`;
    const env: Record<string, string> = {
      ...variables,
      // What Lambda sets in every Node.js function's environment.
      AWS_REGION: REGION,
      AWS_DEFAULT_REGION: REGION,
      AWS_LAMBDA_FUNCTION_NAME: name,
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(p.MemorySize ?? 128),
      AWS_LAMBDA_LOG_GROUP_NAME: logGroup,
      AWS_LAMBDA_LOG_STREAM_NAME: `local/${randomUUID()}`,
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
      AWS_LAMBDA_RUNTIME_API: '127.0.0.1:9001',
      LAMBDA_TASK_ROOT: '/var/task',
      LAMBDA_RUNTIME_DIR: '/var/runtime',
      TZ: ':UTC',
      LANG: 'en_US.UTF-8',
      PATH: '/usr/local/bin:/usr/bin:/bin',
      // The role's temporary credentials, as Lambda hands them to the process.
      AWS_ACCESS_KEY_ID: identity.accessKeyId,
      AWS_SECRET_ACCESS_KEY: identity.secretAccessKey,
      AWS_SESSION_TOKEN: identity.sessionToken,
      // This machine's network: AWS's endpoints are the IAM-checking proxy (no profile or metadata to fall back on).
      AWS_ENDPOINT_URL_DYNAMODB: this.account.endpoint,
      AWS_ENDPOINT_URL_SQS: this.account.endpoint,
      AWS_ENDPOINT_URL_SESV2: this.account.endpoint,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: this.account.endpoint,
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: '/nonexistent/config',
      AWS_SHARED_CREDENTIALS_FILE: '/nonexistent/credentials',
      ARTIFACT_FUNCTION_ARN: d.attributes.get(`${id}.Arn`)!,
      ...this.options.machineEnv,
    };
    this.functions.set(
      id,
      new LocalFunction({
        id,
        codeDir: join(this.outdir, asset.source.path),
        handler: p.Handler,
        timeoutSeconds: p.Timeout ?? 3,
        env,
        node: this.options.node,
      }),
    );
  }

  private functionOf(expression: unknown): string {
    const d = this.deployed;
    const direct = DeployedTemplate.target(expression);
    if (direct && this.functions.has(direct)) return direct;
    const value = String(d.resolve(expression));
    for (const id of this.functions.keys()) if (value === d.refs.get(id) || value === d.attributes.get(`${id}.Arn`)) return id;
    throw new Error(`${JSON.stringify(expression)} names no function of the template`);
  }

  /** Every trigger of every function, with the permission that lets its service invoke the function. */
  private declareTriggers() {
    const d = this.deployed;
    const permissions = d.ofType('AWS::Lambda::Permission').map(([, p]) => ({
      fn: this.functionOf(p.Properties!.FunctionName),
      principal: String(p.Properties!.Principal),
      action: p.Properties!.Action,
    }));
    const permitted = (fn: string, principal: string, action = 'lambda:InvokeFunction') => {
      if (!permissions.some((p) => p.fn === fn && p.principal === principal && p.action === action))
        throw new Error(`${fn} has no ${action} permission for ${principal}: AWS would not invoke it`);
    };
    const add = (id: string, type: string, functionId: string, what: string) =>
      this.triggers.set(id, { id, type, functionId, what, invocations: 0 });
    for (const [id, url] of d.ofType('AWS::Lambda::Url')) {
      const fn = this.functionOf(url.Properties!.TargetFunctionArn);
      if (url.Properties!.AuthType !== 'NONE') throw new Error(`${id}: AuthType ${url.Properties!.AuthType} is not served by this harness`);
      permitted(fn, '*', 'lambda:InvokeFunctionUrl');
      add(id, 'Function URL', fn, `${url.Properties!.AuthType} auth, ${url.Properties!.InvokeMode ?? 'BUFFERED'}`);
    }
    for (const [id, route] of d.ofType('AWS::ApiGatewayV2::Route')) {
      const integrationId = String(d.resolve(route.Properties!.Target)).replace(/^integrations\//, '');
      const integration = d.template.Resources[[...d.refs].find(([, ref]) => ref === integrationId)![0]]!;
      const fn = this.functionOf(integration.Properties!.IntegrationUri);
      if (integration.Properties!.PayloadFormatVersion !== '2.0')
        throw new Error(`${id}: payload format ${integration.Properties!.PayloadFormatVersion} is not served by this harness`);
      permitted(fn, 'apigateway.amazonaws.com');
      add(id, 'HTTP API route', fn, `${route.Properties!.RouteKey} (payload 2.0)`);
    }
    for (const [id, mapping] of d.ofType('AWS::Lambda::EventSourceMapping')) {
      const fn = this.functionOf(mapping.Properties!.FunctionName);
      const source = DeployedTemplate.target(mapping.Properties!.EventSourceArn)!;
      const type = d.template.Resources[source]!.Type === 'AWS::SQS::Queue' ? 'SQS event source' : 'DynamoDB stream event source';
      const p = mapping.Properties!;
      add(
        id,
        type,
        fn,
        `batch ${p.BatchSize}${p.FilterCriteria ? ', filtered' : ''}${p.FunctionResponseTypes?.includes('ReportBatchItemFailures') ? ', partial batch failures' : ''}`,
      );
    }
    for (const [id, rule] of d.ofType('AWS::Events::Rule')) {
      for (const target of rule.Properties!.Targets ?? []) {
        const fn = this.functionOf(target.Arn);
        permitted(fn, 'events.amazonaws.com');
        add(id, 'EventBridge schedule', fn, String(rule.Properties!.ScheduleExpression));
      }
    }
  }

  /** Invokes the function behind a trigger, counting the invocation (the pollers and front doors call this). */
  async invoke(triggerId: string, event: unknown) {
    const trigger = this.triggers.get(triggerId)!;
    trigger.invocations++;
    return this.functions.get(trigger.functionId)!.invoke(event, this.clockOffsetMs);
  }

  // ---- HTTP front doors (payload format 2.0, http-events.ts) ----

  private async functionUrlRequest(id: string, req: IncomingMessage, res: ServerResponse) {
    const event = await httpEvent(req, '$default', 'url', this.clockOffsetMs);
    await respond(res, await this.invoke(id, event));
  }

  private async httpApiRequest(apiId: string, req: IncomingMessage, res: ServerResponse) {
    const d = this.deployed;
    const path = new URL(req.url ?? '/', 'http://local').pathname;
    for (const [routeId, route] of d.ofType('AWS::ApiGatewayV2::Route')) {
      if (DeployedTemplate.target(route.Properties!.ApiId) !== apiId) continue;
      const routeKey = String(route.Properties!.RouteKey);
      const [method, pattern] = routeKey.split(' ') as [string, string];
      if (method !== 'ANY' && method !== req.method) continue;
      const names: string[] = [];
      const regex = new RegExp(
        `^${pattern.replace(/[.*?^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)(\+?)\}/g, (_, name: string, greedy: string) => {
          names.push(name);
          return greedy ? '(.+)' : '([^/]+)';
        })}$`,
      );
      const match = regex.exec(path);
      if (!match) continue;
      const pathParameters = Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(match[i + 1]!)]));
      const event = await httpEvent(req, routeKey, d.refs.get(apiId)!, this.clockOffsetMs, { pathParameters });
      await respond(res, await this.invoke(routeId, event));
      return;
    }
    // API Gateway's answer for a path no route matches.
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Not Found"}');
  }

  /** Reads the table stream as the DynamoDB event source mapping does, filters, batches and invokes. */
  pumpStream(mappingId: string) {
    return this.pollers.pumpStream(mappingId);
  }

  /** Polls the queue as the SQS event source mapping does: batches, partial batch failures, deletes what succeeded. */
  pumpQueue(mappingId: string, rounds = 5) {
    return this.pollers.pumpQueue(mappingId, rounds);
  }

  /**
   * Moves every function's clock forward; the messages a function asked to see again once that time has passed
   * (its visibility timeout, which the local SQS server counts in real time) are made visible again.
   */
  async advanceClock(ms: number) {
    this.clockOffsetMs += ms;
    await this.pollers.releaseDelayed();
  }

  /** One scheduled event, as EventBridge sends it for the rule. */
  async runSchedule(ruleId: string) {
    const d = this.deployed;
    const time = new Date(Date.now() + this.clockOffsetMs).toISOString().replace(/\.\d+Z$/, 'Z');
    const event = {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: ACCOUNT,
      time,
      region: REGION,
      resources: [d.attributes.get(`${ruleId}.Arn`)],
      detail: {},
    };
    const answer = await this.invoke(ruleId, event);
    if (answer.error) throw new Error(`${this.triggers.get(ruleId)!.functionId} failed on its schedule: ${answer.error.errorMessage}`);
    return answer.result;
  }

  /** The ARNs (queues, streams) the function's event source mappings read. */
  eventSourcesOf(functionId: string): string[] {
    return [...this.triggers.values()]
      .filter((t) => t.functionId === functionId && t.type.endsWith('event source'))
      .map((t) => String(this.deployed.resolve(this.deployed.template.Resources[t.id]!.Properties!.EventSourceArn)));
  }

  triggersOf(type: string): Trigger[] {
    return [...this.triggers.values()].filter((t) => t.type === type);
  }
}
