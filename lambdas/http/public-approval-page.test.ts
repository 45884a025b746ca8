import { describe, expect, it } from 'vitest';
import type { ApprovalStore } from '../confirmation/approval-store';
import { approvalPage } from './public-approval-page';

/** A team's own approval page: its issuer's key set and token endpoint are reached over https, or on this machine. */
const options = (signIn: { jwksUrl?: string; tokenUrl?: string }) => ({
  approvals: {} as ApprovalStore,
  secret: 'a'.repeat(40),
  baseUrl: 'https://pay.example.com',
  signIn: {
    issuer: 'https://login.example.com',
    clientId: 'page',
    authorizeUrl: 'https://login.example.com/authorize',
    tokenUrl: signIn.tokenUrl ?? 'https://login.example.com/token',
    jwksUrl: signIn.jwksUrl ?? 'https://login.example.com/jwks.json',
    tenantClaim: 'tenant',
  },
});

describe('approvalPage(): the issuer reached over https', () => {
  it('refuses a plain-http key set or token endpoint off loopback, in one sentence', () => {
    expect(() => approvalPage(options({ jwksUrl: 'http://login.example.com/jwks.json' }))).toThrow(
      /^the approval page's signIn\.jwksUrl must be https \(http only on a loopback address\): http:\/\/login\.example\.com\/jwks\.json$/,
    );
    expect(() => approvalPage(options({ tokenUrl: 'http://login.example.com/token' }))).toThrow(
      /^the approval page's signIn\.tokenUrl must be https/,
    );
  });

  it('takes https, and http on loopback (a local issuer)', () => {
    expect(() => approvalPage(options({}))).not.toThrow();
    expect(() =>
      approvalPage(options({ jwksUrl: 'http://127.0.0.1:9000/jwks.json', tokenUrl: 'http://localhost:9000/token' })),
    ).not.toThrow();
  });
});
