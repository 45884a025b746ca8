import { randomBytes } from 'node:crypto';

/**
 * A synthesized CloudFormation template as deployed into a local account: every resource gets the physical values
 * CloudFormation would give it (names, ARNs, URLs), chosen once, and every intrinsic function (Ref, Fn::GetAtt,
 * Fn::Join, Fn::Sub, Fn::Select, Fn::Split, Fn::FindInMap) is resolved against them, so a function's environment,
 * its role's policies and the queues' policies all name the same things.
 */
export const REGION = 'us-east-1';
/** The local SQS server's account: its queue ARNs and URLs carry it. */
export const ACCOUNT = '000000000000';

export interface CfnResource {
  Type: string;
  Properties?: Record<string, any>;
  DependsOn?: unknown;
  Metadata?: Record<string, any>;
}

export interface CfnTemplate {
  Resources: Record<string, CfnResource>;
  Outputs?: Record<string, { Value: unknown; Description?: string }>;
  Mappings?: Record<string, Record<string, Record<string, unknown>>>;
  Parameters?: Record<string, { Type: string; Default?: unknown }>;
  Conditions?: Record<string, unknown>;
}

/** Where the local stand-ins of the account's front doors listen. */
export interface LocalAddresses {
  /** The logging proxy in front of the emulators: the queue URLs name it (the SDK sends to a queue URL's host). */
  awsProxy: string;
  /** The issuer stand-in (Cognito): the user pool's provider URL and the domain's address. */
  issuer: string;
  /** Per AWS::Lambda::Url logical id: its local front door. */
  functionUrls: Record<string, string>;
  /** Per AWS::ApiGatewayV2::Api logical id: its local front door. */
  httpApis: Record<string, string>;
}

const suffix = () => randomBytes(4).toString('hex').toUpperCase();

export class DeployedTemplate {
  /** Ref value per logical id. */
  readonly refs = new Map<string, string>();
  /** Fn::GetAtt values per `logicalId.Attribute`. */
  readonly attributes = new Map<string, string>();
  /** Resolved strings are rewritten by these (the Cognito domain's https address is the issuer stand-in's). */
  private readonly aliases: Array<[string, string]> = [];
  readonly stackId: string;

  constructor(
    readonly stackName: string,
    readonly template: CfnTemplate,
    readonly local: LocalAddresses,
  ) {
    this.stackId = `arn:aws:cloudformation:${REGION}:${ACCOUNT}:stack/${stackName}/4f6b9a10-5c1d-11ef-8a2b-0a1b2c3d4e5f`;
    for (const [id, resource] of Object.entries(template.Resources)) this.name(id, resource);
    // Domains last: their prefix may be an expression over other resources.
    for (const [id, resource] of Object.entries(template.Resources)) {
      if (resource.Type !== 'AWS::Cognito::UserPoolDomain') continue;
      const prefix = String(this.resolve(resource.Properties!.Domain));
      this.refs.set(id, prefix);
      this.aliases.push([`https://${prefix}.auth.${REGION}.amazoncognito.com`, local.issuer]);
    }
  }

  /** Physical names and attributes, as CloudFormation makes them (names: `<stack>-<logical id>-<suffix>`). */
  private name(id: string, resource: CfnResource) {
    const physical = `${this.stackName}-${id}-${suffix()}`;
    const arn = (service: string, rest: string) => `arn:aws:${service}:${REGION}:${ACCOUNT}:${rest}`;
    const set = (ref: string, attrs: Record<string, string> = {}) => {
      this.refs.set(id, ref);
      for (const [name, value] of Object.entries(attrs)) this.attributes.set(`${id}.${name}`, value);
    };
    switch (resource.Type) {
      case 'AWS::DynamoDB::Table':
        // StreamArn is set once DynamoDB Local made the table (its stream ARN is the emulator's).
        return set(physical, { Arn: arn('dynamodb', `table/${physical}`) });
      case 'AWS::SQS::Queue':
        return set(`${this.local.awsProxy}/${ACCOUNT}/${physical}`, {
          Arn: arn('sqs', physical),
          QueueName: physical,
          QueueUrl: `${this.local.awsProxy}/${ACCOUNT}/${physical}`,
        });
      case 'AWS::SecretsManager::Secret': {
        const secretArn = arn('secretsmanager', `secret:${id}${suffix().slice(0, 4)}-AbCdEf`);
        return set(secretArn, { Id: secretArn });
      }
      case 'AWS::Cognito::UserPool': {
        const poolId = `${REGION}_${randomBytes(5).toString('hex')}`;
        return set(poolId, {
          ProviderURL: `${this.local.issuer}/${poolId}`,
          ProviderName: `${this.local.issuer.replace(/^https?:\/\//, '')}/${poolId}`,
          Arn: arn('cognito-idp', `userpool/${poolId}`),
          UserPoolId: poolId,
        });
      }
      case 'AWS::Cognito::UserPoolClient': {
        const clientId = randomBytes(13).toString('hex');
        return set(clientId, { ClientId: clientId, ClientSecret: randomBytes(24).toString('hex') });
      }
      case 'AWS::ApiGatewayV2::Api': {
        const apiId = randomBytes(5).toString('hex');
        const endpoint = this.local.httpApis[id];
        if (!endpoint) throw new Error(`no local front door for the HTTP API ${id}`);
        return set(apiId, { ApiId: apiId, ApiEndpoint: endpoint });
      }
      case 'AWS::Lambda::Function':
        return set(physical, { Arn: arn('lambda', `function:${physical}`) });
      case 'AWS::Cognito::UserPoolResourceServer':
        // Its Ref is its identifier (the scope prefix).
        return set(String(resource.Properties!.Identifier));
      case 'AWS::Lambda::Url': {
        const url = this.local.functionUrls[id];
        if (!url) throw new Error(`no local front door for the Function URL ${id}`);
        return set(url, { FunctionUrl: `${url}/`, FunctionArn: '' });
      }
      case 'AWS::IAM::Role':
        return set(physical, { Arn: `arn:aws:iam::${ACCOUNT}:role/${physical}`, RoleId: `AROA${suffix()}` });
      case 'AWS::Logs::LogGroup':
        return set(physical, { Arn: arn('logs', `log-group:${physical}:*`) });
      case 'AWS::Events::Rule':
        return set(physical, { Arn: arn('events', `rule/${physical}`) });
      case 'AWS::SNS::Topic':
        return set(arn('sns', physical), { TopicArn: arn('sns', physical), TopicName: physical });
      case 'AWS::KMS::Key': {
        const keyId = randomBytes(16).toString('hex');
        return set(keyId, { Arn: arn('kms', `key/${keyId}`), KeyId: keyId });
      }
      default:
        return set(physical);
    }
  }

  /** Resolves an intrinsic expression (or a plain value holding some) to its deployed value. */
  resolve(value: unknown): any {
    if (Array.isArray(value)) return value.map((v) => this.resolve(v)).filter((v) => v !== NO_VALUE);
    if (typeof value === 'string') return this.alias(value);
    if (!value || typeof value !== 'object') return value;
    const entries = Object.entries(value);
    if (entries.length === 1) {
      const [key, arg] = entries[0] as [string, any];
      if (key === 'Ref') return this.ref(arg);
      if (key === 'Fn::GetAtt') {
        const [id, attr] = Array.isArray(arg) ? arg : String(arg).split(/\.(.*)/s);
        const found = this.attributes.get(`${id}.${attr}`);
        if (found === undefined) throw new Error(`Fn::GetAtt ${id}.${attr}: no such attribute in the local deploy`);
        return this.alias(found);
      }
      if (key === 'Fn::Join') {
        const [separator, parts] = arg as [string, unknown[]];
        return this.alias((this.resolve(parts) as unknown[]).join(separator));
      }
      if (key === 'Fn::Select') {
        const [index, list] = arg as [unknown, unknown];
        return (this.resolve(list) as unknown[])[Number(this.resolve(index))];
      }
      if (key === 'Fn::Split') {
        const [separator, source] = arg as [string, unknown];
        return String(this.resolve(source)).split(separator);
      }
      if (key === 'Fn::Sub') {
        const [text, vars] = typeof arg === 'string' ? [arg, {}] : (arg as [string, Record<string, unknown>]);
        return this.alias(
          text.replace(/\$\{([^}!][^}]*)\}/g, (_, name: string) => {
            if (name in vars) return String(this.resolve(vars[name]));
            return String(name.includes('.') ? this.resolve({ 'Fn::GetAtt': name }) : this.ref(name));
          }),
        );
      }
      if (key === 'Fn::FindInMap') {
        const [map, top, second] = (arg as unknown[]).map((v) => this.resolve(v)) as [string, string, string];
        const found = this.template.Mappings?.[map]?.[top]?.[second];
        if (found === undefined) throw new Error(`Fn::FindInMap ${map}.${top}.${second}: not in the template's mappings`);
        return found;
      }
      if (key === 'Fn::Base64') return Buffer.from(String(this.resolve(arg))).toString('base64');
      if (key.startsWith('Fn::')) throw new Error(`${key} is not resolved by the local deploy`);
    }
    return Object.fromEntries(entries.map(([k, v]) => [k, this.resolve(v)]).filter(([, v]) => v !== NO_VALUE));
  }

  private ref(name: string): unknown {
    switch (name) {
      case 'AWS::Region':
        return REGION;
      case 'AWS::AccountId':
        return ACCOUNT;
      case 'AWS::Partition':
        return 'aws';
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
      case 'AWS::StackName':
        return this.stackName;
      case 'AWS::StackId':
        return this.stackId;
      case 'AWS::NoValue':
        return NO_VALUE;
    }
    const parameter = this.template.Parameters?.[name];
    if (parameter) return parameter.Default;
    const found = this.refs.get(name);
    if (found === undefined) throw new Error(`Ref ${name}: no such resource in the template`);
    return found;
  }

  private alias(text: string): string {
    for (const [from, to] of this.aliases) text = text.split(from).join(to);
    return text;
  }

  /** The resources of one type, by logical id. */
  ofType(type: string): Array<[string, CfnResource]> {
    return Object.entries(this.template.Resources).filter(([, r]) => r.Type === type);
  }

  /** The logical id a resolved Ref/GetAtt expression names (`{Ref: X}` or `{Fn::GetAtt: [X, ...]}`), if it is one. */
  static target(expression: unknown): string | undefined {
    if (!expression || typeof expression !== 'object') return undefined;
    const e = expression as Record<string, any>;
    if (typeof e.Ref === 'string') return e.Ref;
    if (e['Fn::GetAtt']) return Array.isArray(e['Fn::GetAtt']) ? e['Fn::GetAtt'][0] : String(e['Fn::GetAtt']).split('.')[0];
    return undefined;
  }
}

const NO_VALUE = Symbol('AWS::NoValue');
