import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { Annotations, CfnOutput, Stack, Token } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { EnvVars } from '../lambdas/config';
import { GatewayEnvVars, upstreamKeyPrefix } from '../lambdas/gateway/config';
import { GatewayPolicyError, parseGatewayPolicy } from '../lambdas/gateway/policy';
import { IdempotentMcpEndpoint } from './endpoint';
import type { EndpointSettings } from './endpoint-props';
import { StackOutput } from './stack-outputs';
import { gatewayToolsModule } from './tools-entry';

/**
 * Props of `IdempotentMcpGateway`: the upstream MCP server, its write tools' policy, and the endpoint's settings.
 * @public
 */
export interface IdempotentMcpGatewayProps extends EndpointSettings {
  /**
   * The policy file (JSON, docs/gateway.md): per upstream tool, write or read, the key, the fingerprint, the timeout,
   * confirmation and reconciliation. Checked at synth (one sentence per mistake, naming the tool and the field) and
   * bundled as it is; checked against the upstream's `tools/list` at each cold start.
   */
  readonly policy: string;
  /**
   * The upstream MCP server: its streamable-HTTP URL (https; a token, such as another stack's output, is taken as
   * it is). A `command` (stdio, as a local gateway's) is refused: a Lambda function cannot keep a server process of
   * its own.
   */
  readonly upstream: { readonly url: string } | { readonly command: string; readonly args?: readonly string[] };
  /**
   * The gateway's own credentials for the upstream, by tenant: a secret whose value is the credentials file's JSON
   * (`{ "tenants": { "<tenant or *>": { "header": { "name": ..., "value": ... } } } }`, docs/gateway.md). The
   * functions read it with GetSecretValue (granted on this secret only); the agent's token never reaches the upstream.
   */
  readonly credentials: secretsmanager.ISecret;
}

const PROP = 'IdempotentMcpGateway';

/** The policy file read and checked, or an error naming the file and each mistake (thrown at synth). */
function readPolicy(file: unknown): { path: string; policy: unknown } {
  if (typeof file !== 'string' || file.trim() === '')
    throw new Error(`${PROP}: policy must be the path of the gateway's policy file (JSON)`);
  const path = isAbsolute(file) ? file : resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`${PROP}: the policy file ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let policy: unknown;
  try {
    policy = JSON.parse(text);
  } catch (err) {
    throw new Error(`${PROP}: the policy file ${path} is not JSON: ${(err as Error).message}`);
  }
  try {
    // A deployed gateway's upstream is HTTP: a stdio process's environment has nowhere to go.
    if (parseGatewayPolicy(policy).env)
      throw new GatewayPolicyError([
        'the file: env is for a stdio upstream (a command the gateway starts); an HTTP upstream keeps its own environment: remove env',
      ]);
  } catch (err) {
    if (err instanceof GatewayPolicyError)
      throw new Error(`${PROP}: the policy file ${path} is refused.\n${err.mistakes.map((m) => `- ${m}`).join('\n')}`);
    throw err;
  }
  return { path, policy };
}

function upstreamUrl(upstream: IdempotentMcpGatewayProps['upstream'] | undefined): string {
  if (upstream && 'command' in upstream) {
    throw new Error(
      `${PROP}: upstream.command is for a local gateway only (a stdio server it starts); deployed, give upstream.url, the server's streamable-HTTP URL`,
    );
  }
  const url = upstream?.url;
  if (typeof url !== 'string' || (!Token.isUnresolved(url) && !/^https:\/\/[^\s/?#]+(\/\S*)?$/.test(url))) {
    throw new Error(`${PROP}: upstream.url must be the upstream's https URL (got '${String(url).slice(0, 80)}')`);
  }
  return url;
}

/**
 * A retry-safe gateway in front of one upstream MCP server a team cannot change, on Lambda: an IdempotentMcpEndpoint
 * (the table, auth, approval page, reconciler, alarms and outputs, with the same settings) whose tools are the
 * upstream's, as the policy says: writes keyed and fingerprinted, reads passed through, lost answers settled by the
 * policy's lookups. The upstream is called with the gateway's own credential per tenant, from Secrets Manager.
 * @public
 */
export class IdempotentMcpGateway extends IdempotentMcpEndpoint {
  /** The policy file bundled into the functions (absolute path). */
  readonly policyFile: string;
  /** The upstream's URL the functions call. */
  readonly upstreamUrl: string;
  /** Whose records are this gateway's on its table (the functions' TABLE_KEY_PREFIX): its upstream's. */
  readonly tableKeyPrefix: string;

  constructor(scope: Construct, id: string, props: IdempotentMcpGatewayProps) {
    const { path, policy } = readPolicy(props?.policy);
    const url = upstreamUrl(props.upstream);
    if (!props.credentials?.secretArn)
      throw new Error(`${PROP}: credentials must be the Secrets Manager secret holding the gateway's upstream credentials`);
    const { policy: _policy, upstream: _upstream, credentials, ...settings } = props;
    // The gateway runs no code of a team's own, and has no outbox events to deliver.
    super(scope, id, { ...settings, tools: gatewayToolsModule(path, policy) });
    this.policyFile = path;
    this.upstreamUrl = url;
    // The synth loads a tools module to check its exports; this one connects to the upstream, which only a deployed
    // function does (the policy was checked above; the upstream's tools are checked at cold start).
    Annotations.of(this).acknowledgeWarning(
      'idempotent-mcp:modules-unchecked',
      "The gateway policy is checked at synth; the upstream's tools at cold start.",
    );
    // Whose records these are on the table (shared through existingTable): the upstream's, as a local gateway's.
    // A URL known only at deploy (a token) cannot be digested here: the construct's path names the owner instead.
    const keyPrefix = Token.isUnresolved(url) ? upstreamKeyPrefix({ command: 'cdk', args: [this.node.path] }) : upstreamKeyPrefix({ url });
    for (const fn of [this.mcpFunction, this.reconcilerFunction]) {
      fn.addEnvironment(EnvVars.tableKeyPrefix.name, keyPrefix);
      fn.addEnvironment(GatewayEnvVars.upstreamUrl.name, url);
      // The ARN, not the value: the credentials never sit in the template or the function's configuration.
      fn.addEnvironment(GatewayEnvVars.credentialsSecretArn.name, credentials.secretArn);
      // GetSecretValue alone, on this secret alone (a partial ARN matched as CDK's own grants match it); the
      // function's grantPrincipal is its role.
      iam.Grant.addToPrincipal({
        grantee: fn,
        actions: ['secretsmanager:GetSecretValue'],
        resourceArns: [credentials.secretFullArn ?? `${credentials.secretArn}-??????`],
      });
      credentials.encryptionKey?.grantDecrypt(fn);
    }
    // The MCP function keeps the upstream's tools/list it read (PutItem, which it has for its claims); the reconciler
    // only reads a kept one: it puts no item.
    this.mcpFunction.addEnvironment(GatewayEnvVars.keepListing.name, 'true');
    this.tableKeyPrefix = keyPrefix;
    // `idempotent-mcp ops --stack <name>` reviews the gateway's own records by it.
    if (props.outputs !== false && !Stack.of(this).node.tryFindChild(StackOutput.tableKeyPrefix)) {
      new CfnOutput(Stack.of(this), StackOutput.tableKeyPrefix, {
        value: keyPrefix,
        description: "Whose records are this gateway's on the table (its upstream's)",
      });
    }
  }
}
