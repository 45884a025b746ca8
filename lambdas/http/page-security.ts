import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { APPROVALS_PATH } from '../core/endpoint-paths';

/**
 * What every page a person sees here (the approval page, the local sign-in) shares: one stylesheet allowed by its
 * hash and nothing else (no script at all), never cached, never framed, no referrer to other sites (the link names the approval).
 */
const PAGE_STYLE = `
:root{color-scheme:light dark;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
body{margin:0;padding:1rem;line-height:1.45;background:Canvas;color:CanvasText}
main{max-width:34rem;margin:0 auto}
h1{font-size:1.3rem;margin:.5rem 0 1rem}
.banner{padding:.6rem .8rem;border:2px dashed #b45309;border-radius:.4rem;font-weight:600;margin-bottom:1rem}
.summary{font-size:1.15rem;font-weight:600;padding:.8rem;border:1px solid GrayText;border-radius:.4rem;overflow-wrap:anywhere;white-space:normal}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem .8rem;margin:1rem 0}
dt{color:GrayText}dd{margin:0;overflow-wrap:anywhere}
form.decide{display:flex;gap:.8rem;flex-wrap:wrap;margin-top:1.2rem}
button{font:inherit;padding:.7rem 1.4rem;border-radius:.4rem;border:1px solid GrayText;cursor:pointer;min-width:8rem}
button.approve{background:#166534;color:#fff;border-color:#166534}
label{display:block;margin:.6rem 0 .2rem}input{font:inherit;padding:.5rem;width:100%;box-sizing:border-box}
.state{font-size:1.1rem;font-weight:600}
.hint{color:GrayText;font-size:.95rem}
form.sign-out{display:inline;margin:0}form.sign-out button{min-width:0;padding:.3rem .8rem;font-size:.9rem}
`;
/**
 * The CSP allows the stylesheet by the hash of exactly the text sent: it goes out raw (an escaping template would turn
 * the quotes of "Segoe UI" into &quot;, which a <style> element keeps as is, and the browser would refuse it all).
 */
const styleHash = createHash('sha256').update(PAGE_STYLE).digest('base64');

/** The pages' icon: an empty answer of the approval page's own (every page here is served beside it). */
export const APPROVAL_ICON_PATH = `${APPROVALS_PATH}/favicon.ico`;

/**
 * A whole page: the one stylesheet, the title, the body (escaped by the caller's `html` template). It names its icon,
 * the page's own empty one (same origin, as the CSP's img-src allows; a `data:` icon it would refuse), so the browser
 * asks no `/favicon.ico` of a host that may answer 404, wherever the page is served.
 */
export function pageDocument(title: string, body: HtmlEscapedString | Promise<HtmlEscapedString>) {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<link rel="icon" href="${APPROVAL_ICON_PATH}">
<style>${raw(PAGE_STYLE)}</style>
</head>
<body><main>${body}</main></body>
</html>`;
}

/** `formAction`: where the page's forms may post besides itself (none: the sign-in starts by a redirect). */
export function pageHeaders(): MiddlewareHandler {
  return async (c, next) => {
    await next();
    c.header('Cache-Control', 'no-store');
    c.header('Pragma', 'no-cache');
    c.header(
      'Content-Security-Policy',
      `default-src 'none'; style-src 'sha256-${styleHash}'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; img-src 'self'`,
    );
    c.header('X-Frame-Options', 'DENY');
    c.header('X-Content-Type-Options', 'nosniff');
    // same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on the page's own form posts.
    c.header('Referrer-Policy', 'same-origin');
  };
}

/** A page's origin: the public base URL when set, else the one the request came to. */
export const pageBase = (c: Context, publicBaseUrl: string | undefined) => publicBaseUrl ?? new URL(c.req.url).origin;

export const randomToken = (bytes = 32) => randomBytes(bytes).toString('base64url');
export const pkceChallenge = (verifier: string) => createHash('sha256').update(verifier).digest('base64url');

const mac = (secret: string, purpose: string, payload: string) =>
  createHmac('sha256', secret).update(`${purpose}\n${payload}`).digest('base64url');

/** `<payload>.<mac>`, the payload base64url JSON with its own expiry; `purpose` separates the kinds sharing the key. */
export function sealValue(secret: string, purpose: string, value: Record<string, unknown>, expiresAtMs: number): string {
  const payload = Buffer.from(JSON.stringify({ ...value, exp: expiresAtMs })).toString('base64url');
  return `${payload}.${mac(secret, purpose, payload)}`;
}

export function openSealed<T>(secret: string, purpose: string, sealed: string | undefined, nowMs: number): T | undefined {
  const match = /^([A-Za-z0-9_-]{1,4000})\.([A-Za-z0-9_-]{43})$/.exec(sealed ?? '');
  if (!match) return undefined;
  const expected = Buffer.from(mac(secret, purpose, match[1]!));
  const given = Buffer.from(match[2]!);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
  try {
    const value = JSON.parse(Buffer.from(match[1]!, 'base64url').toString('utf8')) as T & { exp?: unknown };
    return typeof value.exp === 'number' && value.exp > nowMs ? value : undefined;
  } catch {
    return undefined;
  }
}

export const sameSecret = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};
