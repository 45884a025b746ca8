import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ContextError, ContextKey, settingsFromContext } from '../../reference/cdk/context';
import { PACKAGE_ROOT } from '../../lib/package-root';
import { cdkJsonContext } from './support';

const run = promisify(execFile);

/** What `cdk synth -c key=value` prints and exits with: the CLI runs the app, and shows its stderr. */
async function synth(context: Record<string, string>, outdir: string) {
  const args = ['synth', '--quiet', '-o', outdir, ...Object.entries(context).flatMap(([key, value]) => ['-c', `${key}=${value}`])];
  try {
    await run(join(PACKAGE_ROOT, 'node_modules/.bin/cdk'), args, { cwd: PACKAGE_ROOT, env: { ...process.env, CDK_DEBUG: '' } });
    return { code: 0, stderr: '' };
  } catch (err) {
    const failure = err as { code: number; stderr: string };
    return { code: failure.code, stderr: failure.stderr };
  }
}

describe('context settings are validated, every one', () => {
  const read = (context: Record<string, unknown>) => settingsFromContext(context);
  const refusal = (context: Record<string, unknown>) => {
    try {
      read(context);
      return 'accepted';
    } catch (err) {
      expect(err).toBeInstanceOf(ContextError);
      return (err as Error).message;
    }
  };

  it('refuse an unknown key, naming the closest valid one', () => {
    expect(refusal({ sandBox: 'true' })).toMatch(/context "sandBox" is not a setting of this app; did you mean "sandbox"\?/);
    expect(refusal({ authIssur: 'https://login.example.com' })).toMatch(/did you mean "authIssuer"/);
    expect(refusal({ paymentUrl: 'https://p.example.com' })).toMatch(/did you mean "paymentsUrl"/);
  });

  it("leave CDK's own keys (feature flags, aws:cdk:*, cached look-ups) alone", () => {
    expect(refusal({ ...cdkJsonContext, 'aws:cdk:bundling-stacks': [], 'availability-zones:account=1:region=x': [] })).toBe('accepted');
  });

  it('refuse a URL without its scheme, or that does not parse, naming the key', () => {
    expect(refusal({ authIssuer: 'login.example.com', authAudience: 'x' })).toMatch(
      /^context "authIssuer" must be a URL starting with https:\/\/ \(got "login.example.com"\)$/,
    );
    expect(refusal({ authIssuer: 'http://login.example.com', authAudience: 'x' })).toMatch(
      /"authIssuer" must be a URL starting with https:\/\//,
    );
    expect(refusal({ paymentsUrl: 'notaurl' })).toMatch(/^context "paymentsUrl" must be a URL/);
    expect(refusal({ ticketsUrl: 'ftp://tickets.example.com' })).toMatch(/"ticketsUrl"/);
    expect(refusal({ publicBaseUrl: 'mcp.example.com' })).toMatch(/"publicBaseUrl"/);
    expect(refusal({ authIssuer: 'https://login.example.com', authAudience: 'x', authJwksUrl: 'keys.json' })).toMatch(/"authJwksUrl"/);
  });

  it('refuse every other value it cannot mean, in one line naming the key', () => {
    const cases: Record<string, unknown>[] = [
      { sandbox: 'yes' },
      { emailMode: 'smtp' },
      { emailFrom: 'not-an-address' },
      { alarmEmail: 'oncall' },
      { alarmTopicArn: 'my-topic' },
      { allowedOrigins: 'https://ok.example.com,app.example.com' },
      { confirmationOptOut: 'request payment' },
      { cognitoDomainPrefix: 'My_Domain' },
      { stackName: '1-stack' },
      { logRetentionDays: '45' },
      { reconcileMaxAttempts: '0' },
      { downstreamTimeoutMs: 'fast' },
      { tableRemovalPolicy: 'delete' },
      { logLevel: 'verbose' },
      { authIssuer: 'https://login.example.com', authAudience: 'x', authTenantClaim: 'org id' },
      { authIssuer: 'https://login.example.com', authAudience: 'x', authRequiredScopes: 'a "b"' },
    ];
    for (const context of cases) {
      const key = Object.keys(context).at(-1)!;
      const message = refusal(context);
      expect(message, key).toMatch(new RegExp(`^context "${key}" must be `));
      expect(message, key).not.toContain('\n');
    }
    expect(refusal({ urlAuthType: 'AWS_IAM' })).toMatch(/"urlAuthType" is no longer supported/);
  });

  it('accept a value of each kind it documents', () => {
    expect(
      refusal({
        stackName: 'My-Endpoint',
        authIssuer: 'https://login.example.com/',
        authAudience: 'https://mcp.example.com',
        authTenantClaim: 'org_id',
        authRequiredScopes: 'mcp/tools mcp/read',
        authJwksUrl: 'https://login.example.com/keys',
        paymentsUrl: 'http://payments.internal:8080',
        emailFrom: 'agent@mail.example.com',
        alarmEmail: 'oncall@example.com',
        alarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:alarms',
        allowedOrigins: 'https://app.example.com, http://localhost:5173',
        confirmationOptOut: 'request_payment',
        publicBaseUrl: 'https://mcp.example.com',
        logRetentionDays: '90',
      }),
    ).toBe('accepted');
    expect(Object.keys(ContextKey).length).toBeGreaterThan(20);
  });
});

describe('cdk synth with a bad setting', () => {
  let outdir: string;
  beforeAll(async () => {
    outdir = await mkdtemp(join(tmpdir(), 'context-synth-'));
  });
  afterAll(() => rm(outdir, { recursive: true, force: true }));

  it('prints one line naming the key, with no stack trace, and fails', async () => {
    const { code, stderr } = await synth({ sandBox: 'true' }, outdir);
    expect(code).not.toBe(0);
    expect(stderr).toContain('Settings refused: context "sandBox" is not a setting of this app; did you mean "sandbox"?');
    expect(stderr).not.toMatch(/^\s+at /m);
  }, 60_000);

  it('does the same for a setting the stack refuses while it is built (a missing companion setting)', async () => {
    const { code, stderr } = await synth({ emailMode: 'ses' }, outdir);
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/Settings refused: .*emailFrom/);
    expect(stderr).not.toMatch(/^\s+at /m);
  }, 60_000);
});
