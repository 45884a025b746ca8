import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deflateRawSync } from 'node:zlib';
import type { AuthorizedCall, Identity } from './aws-account';
import { expect, it } from 'vitest';
import type { LocalDeployment } from './local-deploy';

const run = promisify(execFile);

/** Lambda's limits on a function's deployment package (with its layers, for the unzipped size). */
export const LAMBDA_ZIPPED_LIMIT = 50 * 1024 * 1024;
export const LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024;

/** The sizes of an asset directory as Lambda counts them: unzipped bytes, and the zip of it (deflate, per file). */
export function assetSize(dir: string): { unzipped: number; zipped: number; files: number } {
  let unzipped = 0;
  let zipped = 0;
  let files = 0;
  const walk = (path: string) => {
    for (const name of readdirSync(path)) {
      const file = join(path, name);
      if (statSync(file).isDirectory()) walk(file);
      else {
        const data = readFileSync(file);
        unzipped += data.length;
        // A zip entry: the deflated data plus its local header and central directory record (~ 76 bytes + name twice).
        zipped += deflateRawSync(data, { level: 9 }).length + 76 + 2 * Buffer.byteLength(file.slice(dir.length + 1));
        files++;
      }
    }
  };
  walk(dir);
  return { unzipped, zipped: zipped + 22, files };
}

export const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(2)} MB`;

/**
 * cfn-lint (the CloudFormation linter, Python; from the machine's Python: PyPI is not reachable here and Debian has
 * no package of it). Its findings, one per line; none is clean. W3005 (a DependsOn that a GetAtt already implies)
 * is left out: CDK writes both for every function's role, and the order is the same either way.
 */
export async function cfnLint(templateFile: string): Promise<string[]> {
  const binary = await run('sh', ['-c', 'command -v cfn-lint']).then(
    ({ stdout }) => stdout.trim(),
    () => {
      throw new Error(
        'cfn-lint is not on PATH: install the Python package cfn-lint (pip install cfn-lint); `npm test` checks it first (scripts/prereqs.sh)',
      );
    },
  );
  const { stdout, code } = await run(binary, ['--format', 'parseable', '--ignore-checks', 'W3005', '--', templateFile], {
    maxBuffer: 16 * 1024 * 1024,
  }).then(
    ({ stdout }) => ({ stdout, code: 0 }),
    (err: { stdout?: string; stderr?: string; code?: number }) => {
      if (!err.stdout && err.code !== undefined && err.code > 15) throw new Error(`cfn-lint failed to run: ${err.stderr}`);
      return { stdout: err.stdout ?? '', code: err.code ?? 1 };
    },
  );
  const findings = stdout.split('\n').filter(Boolean);
  if (code !== 0 && findings.length === 0) throw new Error(`cfn-lint exited ${code} without findings`);
  return findings;
}

const glob = (pattern: string, value: string) =>
  new RegExp(
    `^${pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.')}$`,
    'i',
  ).test(value);

/** What Lambda's event source mappings call with the function's role (AWS Lambda developer guide, execution role). */
export const EVENT_SOURCE_ACTIONS = new Set([
  'sqs:ReceiveMessage',
  'sqs:DeleteMessage',
  'sqs:GetQueueAttributes',
  'dynamodb:DescribeStream',
  'dynamodb:GetRecords',
  'dynamodb:GetShardIterator',
  'dynamodb:ListStreams',
]);

/**
 * Never-callable grants known and left for now, each with its reason (printed by every run); the test fails on any
 * other. Delete an entry once lib/ no longer grants it.
 */
export const KNOWN_NEVER_CALLED: ReadonlyArray<{ action: string; onEventSource?: boolean; reason: string }> = [
  {
    action: 'sqs:GetQueueUrl',
    onEventSource: true,
    reason: "CDK's SqsEventSource grants it (grantConsumeMessages) on the consumer's queue; neither the poller nor the code calls it",
  },
];

/**
 * Of the grants no call used here, those the function can never use: an action whose operation the bundle does not
 * contain (esbuild keeps only the SDK commands the code sends) and that no event source of the function calls on
 * that resource (`eventSources`: the ARNs its mappings read). A transaction's items are authorized as PutItem, UpdateItem,
 * DeleteItem and ConditionCheckItem: those names are in a bundle that sends them one by one, and the
 * transaction's own item kinds (`{ Put: ... }`) are not told apart here (the run's calls are).
 */
export function neverCallable(
  identity: Identity,
  calls: readonly AuthorizedCall[],
  bundle: string,
  eventSources: readonly string[],
): string[] {
  return unusedGrants(identity, calls).filter((grant) => {
    const [action, resource] = grant.split(' on ') as [string, string];
    if (EVENT_SOURCE_ACTIONS.has(action) && (resource === '*' || eventSources.some((source) => glob(resource, source)))) return false;
    const operation = action.split(':')[1]!;
    // SendMessageBatch and DeleteMessageBatch are authorized as SendMessage and DeleteMessage.
    return ![operation, `${operation}Batch`].some((name) => bundle.includes(`"${name}"`) || bundle.includes(`${name}Command`));
  });
}

/** A statement's Allow grants (action x resource) that no allowed call of the function used. */
export function unusedGrants(identity: Identity, calls: readonly AuthorizedCall[]): string[] {
  const used = calls.filter((c) => c.functionId === identity.functionId && c.decision === 'Allowed');
  const unused: string[] = [];
  for (const { policy } of identity.policies) {
    for (const statement of policy.Statement) {
      if (statement.Effect !== 'Allow') continue;
      const actions: string[] = [statement.Action].flat();
      const resources: string[] = [statement.Resource].flat();
      for (const action of actions) {
        // Lambda itself writes the function's output to its log group with these.
        if (action.startsWith('logs:')) continue;
        for (const resource of resources) {
          if (!used.some((c) => glob(action, c.action) && glob(resource, c.resource))) unused.push(`${action} on ${resource}`);
        }
      }
    }
  }
  return unused;
}

/** What the run did, printed: functions, triggers and the AWS calls each made, against the template. */
export function report(deployment: LocalDeployment, title = deployment.stackName): string {
  const lines = [`== ${title}: functions and triggers run, against the template ==`];
  for (const [id, fn] of deployment.functions) {
    lines.push(
      `function ${id} (${fn.options.handler}, ${fn.options.timeoutSeconds} s, ${fn.nodeVersion || 'never started'}): ${fn.invocations} invocations`,
    );
    for (const trigger of deployment.triggers.values())
      if (trigger.functionId === id)
        lines.push(`  trigger ${trigger.type} ${trigger.id} [${trigger.what}]: ${trigger.invocations} invocations`);
  }
  lines.push(`== ${title}: AWS calls, each checked against the caller's role and the resource's policy ==`);
  const counted = new Map<string, number>();
  for (const c of deployment.account.calls) {
    const key = `${c.decision.padEnd(9)} ${c.functionId}${c.caller === 'event source' ? ' (event source)' : ''}: ${c.action} on ${c.resource}${c.operation !== c.action.split(':')[1] ? ` [${c.operation}]` : ''}`;
    counted.set(key, (counted.get(key) ?? 0) + 1);
  }
  for (const [key, count] of [...counted].sort()) lines.push(`  ${key} x${count}`);
  lines.push(`== ${title}: grants never used ==`);
  for (const identity of deployment.identities.values())
    for (const grant of unusedGrants(identity, deployment.account.calls)) lines.push(`  ${identity.functionId}: ${grant}`);
  return lines.join('\n');
}

/**
 * What every deployed stack must show once its scenario ran: every function and trigger of the template exercised
 * under Node 22, every AWS call allowed by the caller's role, no grant its code can never use, an answer at every URL
 * it outputs, a clean template and bundles under Lambda's limits.
 */
export function artifactChecks(d: () => LocalDeployment, lint: () => Promise<string[]>) {
  it('answers at every URL the stack outputs (a trigger of its own where it is one)', async () => {
    const deployed = d().deployed;
    for (const [name, output] of Object.entries(deployed.template.Outputs ?? {})) {
      if (!/Url$/.test(name) || /Queue/.test(name)) continue;
      const url = String(deployed.resolve(output.Value));
      const response = await fetch(url, { redirect: 'manual' });
      expect(response.status, `${name} (${url})`).not.toBe(404);
    }
  });

  it('ran every function of the template under Node 22 and every trigger it declares; every AWS call was allowed by the role', () => {
    console.log(report(d()));
    for (const [id, fn] of d().functions) {
      expect(fn.invocations, `${id} never ran`).toBeGreaterThan(0);
      expect(fn.nodeVersion, id).toMatch(/^v22\./);
    }
    const idle = [...d().triggers.values()].filter((t) => t.invocations === 0).map((t) => `${t.type} ${t.id} of ${t.functionId}`);
    expect(idle, 'triggers of the template never exercised').toEqual([]);
    const refused = d()
      .account.calls.filter((c) => c.decision !== 'Allowed')
      .map((c) => `${c.functionId}: ${c.action} on ${c.resource} (${c.decision}${c.detail ? `: ${c.detail}` : ''})`);
    expect(refused, 'AWS calls the role does not allow').toEqual([]);
    // Each function made calls of its own (not only its event source's), checked one by one.
    for (const id of d().functions.keys())
      expect(
        d().account.calls.some((c) => c.functionId === id && c.caller === 'function'),
        id,
      ).toBe(true);
  });

  it('grants no function an action its bundle cannot call and no event source calls for it', () => {
    const known: string[] = [];
    const never = [...d().identities.values()].flatMap((identity) => {
      const bundle = readFileSync(join(d().functions.get(identity.functionId)!.options.codeDir, 'index.mjs'), 'utf8');
      const sources = d().eventSourcesOf(identity.functionId);
      return neverCallable(identity, d().account.calls, bundle, sources)
        .filter((grant) => {
          const [action, resource] = grant.split(' on ') as [string, string];
          const entry = KNOWN_NEVER_CALLED.find((k) => k.action === action && (!k.onEventSource || sources.includes(resource)));
          if (entry) known.push(`${identity.functionId}: ${grant} (known: ${entry.reason})`);
          return !entry;
        })
        .map((grant) => `${identity.functionId}: ${grant}`);
    });
    console.log(`${d().stackName}: never-callable grants left for now:\n  ${known.join('\n  ') || 'none'}`);
    expect(never).toEqual([]);
  });

  it("lints clean (cfn-lint) and ships bundles well under Lambda's size limits", async () => {
    expect(await lint()).toEqual([]);
    for (const [id, fn] of d().functions) {
      const size = assetSize(fn.options.codeDir);
      console.log(
        `${d().stackName} ${id}: ${mb(size.unzipped)} unzipped, ${mb(size.zipped)} zipped, ${size.files} files (limits ${mb(LAMBDA_UNZIPPED_LIMIT)} / ${mb(LAMBDA_ZIPPED_LIMIT)})`,
      );
      expect(size.unzipped).toBeLessThan(LAMBDA_UNZIPPED_LIMIT);
      expect(size.zipped).toBeLessThan(LAMBDA_ZIPPED_LIMIT);
      // The IAM evaluator of these tests is AGPL: a devDependency, never in a function.
      expect(readFileSync(join(fn.options.codeDir, 'index.mjs'), 'utf8'), id).not.toMatch(/cloud-copilot|iam-simulate/);
    }
  });
}

/**
 * A tenant of a deployed stack: an app client the team makes in the stack's user pool (client credentials, the
 * resource server's `tools` scope), and its access token.
 */
export async function tenantToken(deployment: LocalDeployment, clientId: string, secret: string): Promise<string> {
  const [, server] = deployment.deployed.ofType('AWS::Cognito::UserPoolResourceServer')[0]!;
  const scope = `${server.Properties!.Identifier}/tools`;
  deployment.cognito.clients.set(clientId, { clientId, secret, scopes: [scope], callbackUrls: [], flows: ['client_credentials'] });
  return deployment.cognito.clientCredentials(clientId, secret, scope);
}
