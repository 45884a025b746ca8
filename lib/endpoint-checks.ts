import { Token } from 'aws-cdk-lib';
import { EnvVars } from '../lambdas/config';
import { MAX_APPROVAL_TTL_SECONDS } from '../lambdas/confirmation/core/approval';
import { DEFAULT_RECONCILE_PERIOD } from './constructs/reconciler';
import { checkFunctionOptions } from './constructs/service-function';
import type { AuthProps } from './constructs/auth';
import { FUNCTION_NAMES, type IdempotentMcpEndpointProps } from './endpoint-props';

/*
 * The endpoint's props checked before anything is built: a misconfigured prop fails the synth with one sentence
 * naming it, rather than a stack that deploys and misbehaves.
 */

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const OWN_NAMES = new Set(Object.values(EnvVars).map((v) => v.name));

export function checkEnvironment(environment: Record<string, string>) {
  for (const [name, value] of Object.entries(environment)) {
    if (!ENV_NAME.test(name)) throw new Error(`IdempotentMcpEndpoint: environment.${name} is not a valid variable name`);
    if (OWN_NAMES.has(name)) throw new Error(`IdempotentMcpEndpoint: environment.${name} is set by the endpoint itself; use its own prop`);
    if (name.startsWith('AWS_')) throw new Error(`IdempotentMcpEndpoint: environment.${name} is reserved by Lambda`);
    if (typeof value !== 'string') throw new Error(`IdempotentMcpEndpoint: environment.${name} must be a string`);
  }
}

export function checkSettings(props: IdempotentMcpEndpointProps, outbox: boolean) {
  if (props.reconcilePeriod && props.reconcilePeriod.toMilliseconds() < DEFAULT_RECONCILE_PERIOD.toMilliseconds()) {
    throw new Error('IdempotentMcpEndpoint: reconcilePeriod must be at least 1 minute (the shortest EventBridge rate)');
  }
  for (const origin of props.allowedOrigins ?? []) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin))
      throw new Error(`IdempotentMcpEndpoint: allowedOrigins has '${origin}', not an origin (scheme://host[:port])`);
  }
  for (const name of Object.keys(props.functions ?? {})) {
    if (!(FUNCTION_NAMES as readonly string[]).includes(name))
      throw new Error(`IdempotentMcpEndpoint: functions.${name} is not one of the endpoint's functions (${FUNCTION_NAMES.join(', ')})`);
  }
  for (const name of FUNCTION_NAMES) {
    const options = props.functions?.[name];
    if (!outbox && options && (name === 'consumer' || name === 'relay')) {
      throw new Error(`IdempotentMcpEndpoint: functions.${name} is set, but the endpoint has no ${name} without a deliveries module`);
    }
    checkFunctionOptions(`IdempotentMcpEndpoint: functions.${name}`, options);
  }
  checkApprovalPage(props);
  if (!props.vpc && (props.vpcSubnets || props.securityGroups?.length))
    throw new Error('IdempotentMcpEndpoint: vpcSubnets and securityGroups need a vpc');
  if (props.existingTable) {
    for (const prop of ['customerManagedKey', 'tableRemovalPolicy'] as const) {
      if (props[prop] !== undefined)
        throw new Error(`IdempotentMcpEndpoint: ${prop} cannot be set with existingTable (your stack owns that table)`);
    }
    if (outbox && !props.existingTable.tableStreamArn) {
      throw new Error(
        'IdempotentMcpEndpoint: existingTable needs its stream (NEW_IMAGE) with deliveries: give its tableStreamArn (Table.fromTableAttributes), the outbox relay reads it',
      );
    }
  }
}

const HTTPS_URL = /^https:\/\/[^\s/?#]+(\/[^\s?#]*)?$/;

function checkApprovalPage(props: IdempotentMcpEndpointProps) {
  const page = props.approvalPage ?? {};
  const external = props.auth?.external !== undefined;
  // Not in AuthSettings: the endpoint wires it; an untyped app (JavaScript, a cast) is still told.
  if ((props.auth as AuthProps | undefined)?.approvalPage)
    throw new Error(
      'IdempotentMcpEndpoint: auth.approvalPage is set by the endpoint itself from approvalPage and publicBaseUrl; leave it out',
    );
  if (page.signIn && !external)
    throw new Error(
      "IdempotentMcpEndpoint: approvalPage.signIn needs auth.external (the page verifies people's ID tokens at the issuer that signs the agents' tokens); with the stack's own pool, the stack creates the client",
    );
  if (page.enabled === true && external && !page.signIn)
    throw new Error(
      "IdempotentMcpEndpoint: approvalPage.enabled with auth.external needs approvalPage.signIn (your issuer's client id, authorization and token endpoints for the page)",
    );
  if (page.signIn) {
    const { clientId, authorizeUrl, tokenUrl, scopes, tenantClaim } = page.signIn;
    if (!Token.isUnresolved(clientId) && !/^[\x21-\x7e]+$/.test(clientId ?? ''))
      throw new Error('IdempotentMcpEndpoint: approvalPage.signIn.clientId must be a client id (printable, no spaces)');
    for (const [name, url] of [
      ['authorizeUrl', authorizeUrl],
      ['tokenUrl', tokenUrl],
    ] as const) {
      if (!Token.isUnresolved(url) && !HTTPS_URL.test(url ?? ''))
        throw new Error(`IdempotentMcpEndpoint: approvalPage.signIn.${name} must be an https URL (got '${String(url).slice(0, 80)}')`);
    }
    const badScope = scopes?.find((scope) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(scope));
    if (badScope !== undefined) throw new Error(`IdempotentMcpEndpoint: approvalPage.signIn.scopes has '${badScope}', not an OAuth scope`);
    if (tenantClaim !== undefined && !/^\S+$/.test(tenantClaim))
      throw new Error('IdempotentMcpEndpoint: approvalPage.signIn.tenantClaim must be a claim name without spaces');
  }
  const lifetime = page.linkLifetime?.toSeconds({ integral: false });
  if (lifetime !== undefined && (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_APPROVAL_TTL_SECONDS))
    throw new Error(`IdempotentMcpEndpoint: approvalPage.linkLifetime must be whole seconds from 1 to ${MAX_APPROVAL_TTL_SECONDS} (a day)`);
  // The page's callback is registered on it, and issuers accept only https callbacks.
  if (servesApprovalPage(props) && props.publicBaseUrl && !Token.isUnresolved(props.publicBaseUrl) && !HTTPS_URL.test(props.publicBaseUrl))
    throw new Error(
      `IdempotentMcpEndpoint: publicBaseUrl must be an https URL without query or fragment when it serves the approval page (got '${props.publicBaseUrl.slice(0, 80)}')`,
    );
}

/** Whether the page is served: on by default with the stack's pool, with an external issuer only given its client. */
export const servesApprovalPage = (props: IdempotentMcpEndpointProps) =>
  props.approvalPage?.enabled ?? (props.auth?.external === undefined || props.approvalPage?.signIn !== undefined);
