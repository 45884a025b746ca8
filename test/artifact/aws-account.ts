import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { verifySigV4 } from '../support/sigv4-verifying-proxy';
import { ACCOUNT, REGION } from './template';

/** One function's identity: its role's policies, and the credentials Lambda hands its process. */
export interface Identity {
  functionId: string;
  roleArn: string;
  /** The role's identity policies, resolved. */
  policies: Array<{ name: string; policy: any }>;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
}

/** One AWS request a function made, as IAM authorizes it: one action on one resource (a transaction: one per item). */
export interface AuthorizedCall {
  functionId: string;
  /** The API operation the request named (TransactWriteItems, SendMessage...). */
  operation: string;
  action: string;
  resource: string;
  decision: 'Allowed' | 'ExplicitlyDenied' | 'ImplicitlyDenied' | 'error';
  detail?: string;
  /** The caller: the function's own code, or Lambda's poller reading a trigger with the function's role. */
  caller: 'function' | 'event source';
}

export interface EmailSent {
  from: string;
  to: string[];
  subject?: string;
  raw: any;
}

const arn = (service: string, rest: string) => `arn:aws:${service}:${REGION}:${ACCOUNT}:${rest}`;
const tableArn = (name: string) => arn('dynamodb', `table/${name}`);
const queueArnOfUrl = (url: string) => arn('sqs', new URL(url).pathname.split('/').filter(Boolean).at(-1)!);

/** The transaction items IAM authorizes one by one (TransactWriteItems is no IAM action of its own). */
const TRANSACT_ITEM_ACTIONS: Record<string, string> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  ConditionCheck: 'ConditionCheckItem',
  Get: 'GetItem',
};

/**
 * The local account's front: a logging proxy that every AWS SDK call of every function reaches (through the
 * AWS_ENDPOINT_URL_* variables and the queue URLs), which checks the request's SigV4 signature against the
 * function's credentials, names the IAM action(s) and resource(s) of the request, evaluates each against the
 * function's role and the resource's policy with an offline IAM evaluator (iam-simulate), answers AccessDenied as
 * AWS would when denied, and otherwise forwards to DynamoDB Local or the local SQS server. SES and Secrets Manager
 * have no local server: SendEmail is answered here and recorded, GetSecretValue from the secrets the stack made.
 */
export class LocalAwsAccount {
  readonly calls: AuthorizedCall[] = [];
  readonly emails: EmailSent[] = [];
  private readonly identities = new Map<string, Identity>();
  /** Resource policies by resource ARN (queue policies), resolved. */
  readonly resourcePolicies = new Map<string, any>();
  private readonly secrets = new Map<string, string>();
  /** Shard iterators handed out, by the stream they read (GetRecords names no stream). */
  private readonly iteratorStreams = new Map<string, string>();
  private server?: Server;
  endpoint = '';
  /** Calls made by the harness's own event source pollers carry this header; the identity is still the function's. */
  static readonly POLLER_HEADER = 'x-artifact-event-source';

  constructor(private readonly targets: { dynamodb: string; sqs: string }) {}

  addIdentity(functionId: string, roleArn: string, policies: Identity['policies']): Identity {
    const identity: Identity = {
      functionId,
      roleArn,
      policies,
      accessKeyId: `ASIA${randomBytes(8).toString('hex').toUpperCase()}`,
      secretAccessKey: randomBytes(20).toString('base64'),
      sessionToken: randomBytes(32).toString('base64'),
    };
    this.identities.set(identity.accessKeyId, identity);
    return identity;
  }

  /** The local SQS server's URL of a queue the account names by `accountUrl`. */
  readonly queueUrls = new Map<string, string>();

  private rewriteQueueUrls(data: Buffer, direction: 'to emulator' | 'to account'): Buffer {
    let text = data.toString('utf8');
    for (const [account, emulator] of this.queueUrls)
      text = direction === 'to emulator' ? text.split(account).join(emulator) : text.split(emulator).join(account);
    return Buffer.from(text);
  }

  addSecret(secretArn: string, value: string) {
    this.secrets.set(secretArn, value);
  }

  /** A secret deleted (GetSecretValue answers ResourceNotFoundException, as AWS does once it is gone). */
  deleteSecret(secretArn: string) {
    this.secrets.delete(secretArn);
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.handle(req).then(
        ({ status, headers, body }) => res.writeHead(status, headers).end(body),
        (err: Error) =>
          res
            .writeHead(500, { 'content-type': 'application/json' })
            .end(JSON.stringify({ __type: 'InternalFailure', message: err.message })),
      );
    });
    // Longer than the SDK's idle keep-alive sockets live: a reused socket is never closed under a request.
    this.server.keepAliveTimeout = 120_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.endpoint = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop() {
    const server = this.server;
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** Evaluates one action on one resource for `identity` and records it. */
  private async authorize(
    identity: Identity,
    operation: string,
    action: string,
    resource: string,
    caller: AuthorizedCall['caller'],
    context: Record<string, string | string[]> = {},
  ): Promise<AuthorizedCall> {
    const resourcePolicy = this.resourcePolicies.get(resource);
    const simulation = {
      request: {
        principal: identity.roleArn,
        action,
        resource: { resource, accountId: ACCOUNT },
        contextVariables: {
          // The SDK calls AWS over TLS (the local hop is plain HTTP on loopback); the queues' policies deny anything else.
          'aws:SecureTransport': 'true',
          'aws:PrincipalArn': identity.roleArn,
          'aws:PrincipalAccount': ACCOUNT,
          'aws:RequestedRegion': REGION,
          ...context,
        },
      },
      identityPolicies: identity.policies,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(resourcePolicy ? { resourcePolicy } : {}),
    };
    const outcome = await runSimulation(simulation as any, {});
    const call: AuthorizedCall =
      outcome.resultType === 'error'
        ? {
            functionId: identity.functionId,
            operation,
            action,
            resource,
            caller,
            decision: 'error',
            detail: JSON.stringify(outcome.errors).slice(0, 500),
          }
        : {
            functionId: identity.functionId,
            operation,
            action,
            resource,
            caller,
            decision: outcome.overallResult as AuthorizedCall['decision'],
          };
    this.calls.push(call);
    return call;
  }

  private async handle(req: IncomingMessage): Promise<{ status: number; headers: Record<string, string>; body: Buffer | string }> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const authorization = String(req.headers.authorization ?? '');
    const accessKeyId = /Credential=([^/]+)\//.exec(authorization)?.[1] ?? '';
    const service = /Credential=[^/]+\/\d{8}\/[^/]+\/([^/]+)\//.exec(authorization)?.[1] ?? '';
    const identity = this.identities.get(accessKeyId);
    const denied = (type: string, message: string) => ({
      status: 400,
      headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-query-error': `${type};Sender` },
      body: JSON.stringify({ __type: `com.amazonaws.${service}#${type}`, message }),
    });
    if (!identity)
      return denied(
        'UnrecognizedClientException',
        `The security token included in the request is invalid (access key ${accessKeyId || 'none'})`,
      );
    const verdict = verifySigV4({ method: req.method ?? '', path: req.url ?? '/', headers: req.headers, body }, [identity], {
      region: REGION,
      service,
    });
    if (!verdict.valid) return denied('InvalidSignatureException', `signature: ${verdict.reason}`);
    if (req.headers['x-amz-security-token'] !== identity.sessionToken)
      return denied('UnrecognizedClientException', 'the session token does not match the access key');
    const caller: AuthorizedCall['caller'] = req.headers[LocalAwsAccount.POLLER_HEADER] ? 'event source' : 'function';

    const requests = this.actionsOf(service, req, body);
    const results: AuthorizedCall[] = [];
    for (const { operation, action, resource, context } of requests)
      results.push(await this.authorize(identity, operation, action, resource, caller, context));
    const refused = results.find((r) => r.decision !== 'Allowed');
    if (refused) {
      return denied(
        'AccessDeniedException',
        `User: ${identity.roleArn} is not authorized to perform: ${refused.action} on resource: ${refused.resource} (${refused.decision}${refused.detail ? `: ${refused.detail}` : ''})`,
      );
    }
    if (service === 'ses') {
      const request = JSON.parse(body.toString() || '{}');
      this.emails.push({
        from: request.FromEmailAddress,
        to: request.Destination?.ToAddresses ?? [],
        subject: request.Content?.Simple?.Subject?.Data,
        raw: request,
      });
      return {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ MessageId: `ses-${randomBytes(8).toString('hex')}` }),
      };
    }
    // The local SQS server knows its queues by the URLs it made (its own address); the functions name them by the
    // proxy's (the template's queue URLs are this account's).
    if (service === 'secretsmanager') {
      // No emulator of Secrets Manager runs here: the account answers GetSecretValue from the secrets it holds.
      const request = JSON.parse(body.toString() || '{}');
      const value = this.secrets.get(request.SecretId);
      if (value === undefined)
        return {
          status: 400,
          headers: { 'content-type': 'application/x-amz-json-1.1' },
          body: JSON.stringify({ __type: 'ResourceNotFoundException', message: "Secrets Manager can't find the specified secret." }),
        };
      return {
        status: 200,
        headers: { 'content-type': 'application/x-amz-json-1.1' },
        body: JSON.stringify({
          ARN: request.SecretId,
          Name: String(request.SecretId).split(':').at(-1),
          SecretString: value,
          VersionId: 'v1',
          VersionStages: ['AWSCURRENT'],
          CreatedDate: 1.7e9,
        }),
      };
    }
    const answer =
      service === 'sqs'
        ? await forward(this.targets.sqs, req, this.rewriteQueueUrls(body, 'to emulator')).then((a) => ({
            ...a,
            body: this.rewriteQueueUrls(a.body, 'to account'),
          }))
        : await forward(this.targets.dynamodb, req, body);
    if (service === 'dynamodb' && /GetShardIterator|GetRecords/.test(String(req.headers['x-amz-target']))) {
      const request = JSON.parse(body.toString());
      const stream = request.StreamArn ?? this.iteratorStreams.get(request.ShardIterator);
      const next = JSON.parse(answer.body.toString() || '{}');
      for (const iterator of [next.ShardIterator, next.NextShardIterator])
        if (iterator && stream) this.iteratorStreams.set(iterator, stream);
    }
    return answer;
  }

  /** The IAM action(s) and resource(s) a request is authorized as. */
  private actionsOf(
    service: string,
    req: IncomingMessage,
    body: Buffer,
  ): Array<{ operation: string; action: string; resource: string; context?: Record<string, string | string[]> }> {
    const target = String(req.headers['x-amz-target'] ?? '');
    const request = body.length && /json/.test(String(req.headers['content-type'])) ? JSON.parse(body.toString()) : {};
    if (service === 'dynamodb') {
      const operation = target.split('.')[1] ?? '';
      const one = (action: string, resource: string) => ({ operation, action: `dynamodb:${action}`, resource });
      if (operation === 'TransactWriteItems' || operation === 'TransactGetItems') {
        return (request.TransactItems as Array<Record<string, { TableName: string }>>).map((item) => {
          const [kind, spec] = Object.entries(item)[0]!;
          return one(TRANSACT_ITEM_ACTIONS[kind]!, tableArn(spec.TableName));
        });
      }
      if (operation === 'BatchWriteItem' || operation === 'BatchGetItem')
        return Object.keys(request.RequestItems).map((table) => one(operation, tableArn(table)));
      if (operation === 'ListStreams') return [one(operation, '*')];
      if (operation === 'GetRecords') return [one(operation, this.iteratorStreams.get(request.ShardIterator) ?? 'unknown-stream')];
      if (request.StreamArn) return [one(operation, request.StreamArn)];
      if (request.TableName)
        return [
          one(operation, request.IndexName ? `${tableArn(request.TableName)}/index/${request.IndexName}` : tableArn(request.TableName)),
        ];
      return [one(operation, '*')];
    }
    if (service === 'sqs') {
      const form = new URLSearchParams(request.QueueUrl ? '' : body.toString());
      const operation = target ? target.split('.')[1]! : (form.get('Action') ?? '');
      const queueUrl = request.QueueUrl ?? form.get('QueueUrl');
      // SendMessageBatch and DeleteMessageBatch are authorized as SendMessage and DeleteMessage.
      const action = operation.replace(/Batch$/, '');
      if (operation === 'GetQueueUrl')
        return [{ operation, action: 'sqs:GetQueueUrl', resource: arn('sqs', request.QueueName ?? form.get('QueueName')) }];
      return [{ operation, action: `sqs:${action}`, resource: queueUrl ? queueArnOfUrl(queueUrl) : '*' }];
    }
    if (service === 'secretsmanager') {
      const operation = target.split('.')[1] ?? '';
      return [{ operation, action: `secretsmanager:${operation}`, resource: request.SecretId ?? '*' }];
    }
    if (service === 'ses') {
      if (req.method === 'POST' && (req.url ?? '').startsWith('/v2/email/outbound-emails')) {
        const from: string = request.FromEmailAddress ?? '';
        const recipients: string[] = [
          ...(request.Destination?.ToAddresses ?? []),
          ...(request.Destination?.CcAddresses ?? []),
          ...(request.Destination?.BccAddresses ?? []),
        ];
        // SES authorizes the sending identity and, in the SES sandbox, every recipient identity.
        return [from, ...recipients].map((address) => ({
          operation: 'SendEmail',
          action: 'ses:SendEmail',
          resource: arn('ses', `identity/${address}`),
          context: { 'ses:FromAddress': from, 'ses:Recipients': recipients, 'ses:ApiVersion': '2' },
        }));
      }
      return [{ operation: `${req.method} ${req.url}`, action: 'ses:Unknown', resource: '*' }];
    }
    return [{ operation: target, action: `${service}:Unknown`, resource: '*' }];
  }

  /** Signed calls of the event source pollers: the AWS SDK with the function's credentials, through this proxy. */
  credentialsOf(functionId: string) {
    const identity = [...this.identities.values()].find((i) => i.functionId === functionId)!;
    return { accessKeyId: identity.accessKeyId, secretAccessKey: identity.secretAccessKey, sessionToken: identity.sessionToken };
  }
}

function forward(
  target: string,
  req: IncomingMessage,
  body: Buffer,
): Promise<{ status: number; headers: Record<string, string>; body: Buffer }> {
  const url = new URL(target);
  return new Promise((resolve, reject) => {
    const upstream = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: url.host, 'content-length': String(body.length) },
      },
      async (res) => {
        const answer: Buffer[] = [];
        for await (const chunk of res) answer.push(chunk as Buffer);
        const headers: Record<string, string> = {};
        for (const [key, value] of Object.entries(res.headers))
          if (value !== undefined && !['transfer-encoding', 'connection', 'content-length'].includes(key)) headers[key] = String(value);
        resolve({ status: res.statusCode ?? 502, headers, body: Buffer.concat(answer) });
      },
    );
    upstream.on('error', reject);
    upstream.end(body);
  });
}
