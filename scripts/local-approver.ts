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

/** One person's browser session: its cookies, kept across the sign-in redirects. */
export class LocalPerson {
  private readonly cookies = new Map<string, string>();

  /** One request, redirects not followed, cookies sent and kept. */
  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const cookie = [...this.cookies].map(([key, value]) => `${key}=${value}`).join('; ');
    const response = await fetch(url, {
      ...init,
      redirect: 'manual',
      headers: { ...(init.headers as Record<string, string>), ...(cookie ? { cookie } : {}) },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const index = pair.indexOf('=');
      const value = pair.slice(index + 1);
      if (value === '' || /max-age=0|expires=thu, 01 jan 1970/i.test(line)) this.cookies.delete(pair.slice(0, index));
      else this.cookies.set(pair.slice(0, index), value);
    }
    return response;
  }

  /** GET `url`, following redirects (the sign-in round included); the final response. */
  async open(url: string): Promise<Response> {
    let response = await this.request(url);
    for (let hops = 0; hops < 5 && response.status >= 300 && response.status < 400; hops++)
      response = await this.request(new URL(response.headers.get('location')!, url).toString());
    return response;
  }

  /** Opens the link and signs in at the dev issuer's page as `name` of `tenant`: the approval page's HTML. */
  async signIn(link: string, tenant: string, name = 'demo-person'): Promise<string> {
    const first = await this.request(link);
    if (first.status !== 302) throw new Error(`the approval page did not send the person to sign in (HTTP ${first.status})`);
    const authorize = new URL(first.headers.get('location') ?? '', link);
    const signInPage = await this.request(authorize.toString());
    if (signInPage.status !== 200 || !(await signInPage.text()).includes('Local development sign-in'))
      throw new Error(
        `no local dev issuer sign-in at ${authorize.origin}${authorize.pathname} (HTTP ${signInPage.status}): only a local endpoint can be approved unattended`,
      );
    const q = authorize.searchParams;
    const signedIn = await this.request(
      `${authorize.origin}${authorize.pathname}`,
      form(link, {
        client_id: q.get('client_id') ?? '',
        redirect_uri: q.get('redirect_uri') ?? '',
        state: q.get('state') ?? '',
        code_challenge: q.get('code_challenge') ?? '',
        tenant,
        name,
      }),
    );
    if (signedIn.status !== 303) throw new Error(`the local sign-in refused ${name} of ${tenant} (HTTP ${signedIn.status})`);
    // The page answers with what it has to say (the decision form, or why there is none): the caller reads it.
    const page = await this.open(new URL(signedIn.headers.get('location') ?? '', link).toString());
    return page.text();
  }

  /** POSTs a decision with the CSRF token of `pageHtml` (or the one given). */
  decide(link: string, decision: LocalDecision['decision'], pageHtml: string, csrf = csrfOf(pageHtml) ?? ''): Promise<Response> {
    return this.request(link, form(link, { decision, csrf }));
  }
}

const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

const form = (link: string, fields: Record<string, string>): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(link).origin },
  body: new URLSearchParams(fields),
});

export async function decideAsLocalPerson(link: string, { tenant, name, decision }: LocalDecision): Promise<void> {
  const person = new LocalPerson();
  const html = await person.signIn(link, tenant, name);
  if (!csrfOf(html))
    throw new Error(
      `the approval page offers no decision: ${html
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')
        .trim()
        .slice(0, 200)}`,
    );
  const decided = await person.decide(link, decision, html);
  if (decided.status !== 200) throw new Error(`the approval page refused the decision (HTTP ${decided.status})`);
}
