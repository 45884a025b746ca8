/**
 * Free text shown to a person next to what they approve (a memo, a payee's name) must not be able to draw
 * something that looks like the summary: a newline starting a fake "Pay 1.00 EUR" line, a right-to-left override
 * reordering the amount, a run of wide or invisible characters pushing text out of sight. Every character that draws
 * blank or moves text is made visible as `\n` or `\u{202E}`, on one line, in the page and in form mode alike.
 */

/**
 * What is written out, by Unicode's own properties: controls and format characters (Cc, Cf: bidi overrides and
 * isolates, zero-width characters), line and paragraph separators (Zl, Zp), every White_Space character but the
 * plain space (tabs, no-break, em and ideographic spaces), every Default_Ignorable_Code_Point (drawn as nothing:
 * the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, variation selectors, U+180E), and Bidi_Control. Unicode has
 * no property for a visible character with a blank glyph: the one in use for blank names, U+2800 BRAILLE PATTERN
 * BLANK, is named here.
 */
const INVISIBLE = /(?! )[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}\u2800]/gu;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const escapeInvisible = (char: string) => NAMED[char] ?? `\\u{${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}}`;

/**
 * The text on one line, every invisible, blank-drawing or line-breaking character written out.
 */
export function visibleText(text: string): string {
  return text.replace(INVISIBLE, escapeInvisible);
}

/**
 * Free text inside a summary: in double quotes, with quotes and backslashes escaped, so it reads as one quoted value
 * and cannot close its quote to continue the summary.
 */
export function quotedText(text: string): string {
  return `"${visibleText(text.replace(/[\\"]/g, (char) => `\\${char}`))}"`;
}
