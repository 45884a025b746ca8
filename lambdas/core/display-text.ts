/**
 * Free text shown to a person next to what they approve (a memo, a payee's name) must not be able to draw
 * something that looks like the summary: a newline starting a fake "Pay 1.00 EUR" line, a right-to-left override
 * reordering the amount, an invisible character. Such characters are made visible as `\n` or `\u{202E}`, on one
 * line, in the page and in form mode alike.
 */

/** Control (Cc), format (Cf: bidi overrides and isolates, zero-width), line and paragraph separators (Zl, Zp). */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const escapeInvisible = (char: string) => NAMED[char] ?? `\\u{${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}}`;

/** The text on one line, every invisible or line-breaking character written out. */
export function visibleText(text: string): string {
  return text.replace(INVISIBLE, escapeInvisible);
}

/** Whether the text has a character `visibleText` would write out. */
export const hasInvisibleCharacters = (text: string): boolean => new RegExp(INVISIBLE.source, 'u').test(text);

/**
 * Free text inside a summary: in double quotes, with quotes and backslashes escaped, so it reads as one quoted value
 * and cannot close its quote to continue the summary.
 */
export function quotedText(text: string): string {
  return `"${visibleText(text.replace(/[\\"]/g, (char) => `\\${char}`))}"`;
}
