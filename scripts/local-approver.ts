/**
 * A person at the approval page over plain HTTP, for unattended runs against the local endpoint (`npm run demo`,
 * tests): opens the link, signs in at the dev issuer's sign-in page (`/dev-issuer/authorize`, served by `npm start`)
 * as `name` of `tenant`, and approves or declines with the page's own form and CSRF token: the steps a person takes
 * in a browser. Only the local dev issuer signs in without a password; a deployed endpoint needs a real person.
 */
export interface LocalDecision {
  tenant: string;
  /** The person's name at the dev issuer. Default "demo-person". */
  name?: string;
  decision: 'approve' | 'decline';
}

export async function decideAsLocalPerson(link: string, { tenant, name = 'demo-person', decision }: LocalDecision): Promise<void> {
  const cookies = new Map<string, string>();
  const origin = new URL(link).origin;
  const request = async (url: string, init: RequestInit = {}) => {
    const cookie = [...cookies].map(([key, value]) => `${key}=${value}`).join('; ');
    const response = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) } });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const index = pair.indexOf('=');
      const value = pair.slice(index + 1);
      if (value === '' || /max-age=0/i.test(line)) cookies.delete(pair.slice(0, index));
      else cookies.set(pair.slice(0, index), value);
    }
    return response;
  };
  const location = (response: Response, base: string) => new URL(response.headers.get('location') ?? '', base).toString();
  const form = (fields: Record<string, string>) => ({
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin },
    body: new URLSearchParams(fields),
  });

  const first = await request(link);
  if (first.status !== 302) throw new Error(`the approval page did not send the person to sign in (HTTP ${first.status})`);
  const authorize = new URL(location(first, link));
  const signInPage = await request(authorize.toString());
  if (signInPage.status !== 200 || !(await signInPage.text()).includes('Local development sign-in'))
    throw new Error(`no local dev issuer sign-in at ${authorize.origin}${authorize.pathname} (HTTP ${signInPage.status}): only a local endpoint can be approved unattended`);
  const q = authorize.searchParams;
  const signedIn = await request(
    `${authorize.origin}${authorize.pathname}`,
    form({ client_id: q.get('client_id') ?? '', redirect_uri: q.get('redirect_uri') ?? '', state: q.get('state') ?? '', code_challenge: q.get('code_challenge') ?? '', tenant, name }),
  );
  if (signedIn.status !== 303) throw new Error(`the local sign-in refused ${name} of ${tenant} (HTTP ${signedIn.status})`);
  const callback = await request(location(signedIn, link));
  if (callback.status !== 303) throw new Error(`the approval page's sign-in did not complete (HTTP ${callback.status})`);
  const page = await request(location(callback, link));
  const html = await page.text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(html)?.[1];
  if (page.status !== 200 || !csrf) throw new Error(`the approval page offers no decision (HTTP ${page.status})`);
  const decided = await request(link, form({ decision, csrf }));
  if (decided.status !== 200) throw new Error(`the approval page refused the decision (HTTP ${decided.status})`);
}
