import { expect } from 'vitest';

/**
 * A person at the approval page over plain HTTP (the browser test drives Chromium through the same steps): follows
 * the sign-in redirects to the local dev issuer, signs in as `name` of `tenant`, and approves or declines.
 */
export class PageVisitor {
  private readonly cookies = new Map<string, string>();

  private cookieHeader() {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  private keep(response: Response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const index = pair!.indexOf('=');
      const name = pair!.slice(0, index);
      const value = pair!.slice(index + 1);
      if (/max-age=0|expires=thu, 01 jan 1970/i.test(line) || value === '') this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const response = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers as Record<string, string>), cookie: this.cookieHeader() } });
    this.keep(response);
    return response;
  }

  /** GET `url`, following redirects (the sign-in round included); the final response. */
  async open(url: string): Promise<Response> {
    let response = await this.request(url);
    for (let hops = 0; hops < 5 && response.status >= 300 && response.status < 400; hops++)
      response = await this.request(new URL(response.headers.get('location')!, url).toString());
    return response;
  }

  /** Opens the link and signs in at the dev issuer's page: the approval page's HTML. */
  async signIn(link: string, tenant: string, name = 'alice'): Promise<string> {
    const first = await this.request(link);
    expect(first.status).toBe(302);
    const authorize = new URL(first.headers.get('location')!, link);
    const form = await this.request(authorize.toString());
    expect(form.status).toBe(200);
    expect(await form.text()).toContain('Local development sign-in');
    const q = authorize.searchParams;
    const back = await this.request(new URL(authorize.pathname, link).toString(), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(link).origin },
      body: new URLSearchParams({ client_id: q.get('client_id')!, redirect_uri: q.get('redirect_uri')!, state: q.get('state')!, code_challenge: q.get('code_challenge')!, tenant, name }),
    });
    expect(back.status).toBe(303);
    const page = await this.open(new URL(back.headers.get('location')!, link).toString());
    return page.text();
  }

  /** POSTs a decision with the CSRF token of `pageHtml` (or the one given). */
  async decide(link: string, decision: 'approve' | 'decline', pageHtml: string, csrf = /name="csrf" value="([^"]+)"/.exec(pageHtml)?.[1] ?? '') {
    return this.request(link, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(link).origin },
      body: new URLSearchParams({ decision, csrf }),
    });
  }
}
