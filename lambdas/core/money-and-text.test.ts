import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { formatMinorUnits, isPayableCurrency, minorUnitsOf, NOT_PAYABLE_CODES } from './money';
import { quotedText, visibleText } from './display-text';

describe("amounts follow each currency's minor units (ISO 4217)", () => {
  it.each([
    [1250, 'EUR', '12.50 EUR'],
    [1250, 'JPY', '1,250 JPY'],
    [1_000_000_000, 'JPY', '1,000,000,000 JPY'],
    [1_000_000_000, 'EUR', '10,000,000.00 EUR'],
    [123_456_789, 'BHD', '123,456.789 BHD'],
    [-123_456, 'EUR', '-1,234.56 EUR'],
    [99_999, 'EUR', '999.99 EUR'],
    [Number.MAX_SAFE_INTEGER, 'USD', '90,071,992,547,409.91 USD'],
    [1250, 'BHD', '1.250 BHD'],
    [5, 'USD', '0.05 USD'],
    [7, 'KWD', '0.007 KWD'],
    [100, 'ISK', '100 ISK'],
  ])('%i %s reads %s', (amount, currency, text) => {
    expect(formatMinorUnits(amount, currency)).toBe(text);
  });

  it('only ISO 4217 codes one can pay in are currencies', () => {
    expect(['EUR', 'USD', 'JPY', 'CHF'].every(isPayableCurrency)).toBe(true);
    for (const code of ['ZZZ', 'eur', 'EURO', 'XXX', 'XTS', 'XAU', 'XDR', 'XSU', 'XUA', 'USN', 'CLF', ''])
      expect(isPayableCurrency(code), code).toBe(false);
    expect(minorUnitsOf('JPY')).toBe(0);
    expect(() => formatMinorUnits(100, 'ZZZ')).toThrow(/ISO 4217/);
  });

  it('the codes refused are exactly those ISO 4217 list one marks as having no minor unit (N.A.) or as a fund', () => {
    const table = readFileSync(createRequire(import.meta.url).resolve('currency-codes/iso-4217-list-one.xml'), 'utf8');
    const marked = new Set<string>();
    const listed = new Set<string>();
    for (const [, entry] of table.matchAll(/<CcyNtry>([\s\S]*?)<\/CcyNtry>/g)) {
      const code = /<Ccy>([A-Z]{3})<\/Ccy>/.exec(entry!)?.[1];
      if (!code) continue;
      listed.add(code);
      if (/<CcyMnrUnts>N\.A\.<\/CcyMnrUnts>/.test(entry!) || /IsFund="true"/.test(entry!)) marked.add(code);
    }
    expect([...NOT_PAYABLE_CODES].sort()).toEqual([...marked].sort());
    // Every other code of the table is a currency one can pay in, with its own minor units.
    for (const code of listed) expect(isPayableCurrency(code), code).toBe(!marked.has(code));
  });
});

describe('free text cannot imitate the summary', () => {
  it('line breaks, bidi overrides and invisible characters are written out on one line', () => {
    expect(visibleText('rent\nPay 1.00 EUR')).toBe('rent\\nPay 1.00 EUR');
    expect(visibleText('a\u202Eb\u2066c\u200Bd\u2028e\r\t')).toBe('a\\u{202E}b\\u{2066}c\\u{200B}d\\u{2028}e\\r\\t');
    expect(visibleText('Zahlung für Café 東京')).toBe('Zahlung für Café 東京');
  });

  it('wide spaces and letters that draw blank are written out; the plain space is not', () => {
    expect(visibleText('rent\u2003\u3000\u00A0x')).toBe('rent\\u{2003}\\u{3000}\\u{00A0}x');
    expect(visibleText('a\u3164b\u2800c\u115Fd\u1160e\uFFA0f\u180Eg\uFE0Fh')).toBe(
      'a\\u{3164}b\\u{2800}c\\u{115F}d\\u{1160}e\\u{FFA0}f\\u{180E}g\\u{FE0F}h',
    );
    expect(visibleText('pay the rent')).toBe('pay the rent');
  });

  it('by Unicode properties, not a list: every White_Space (but the space) and Default_Ignorable_Code_Point is written out', () => {
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const char = String.fromCodePoint(cp);
      if (char === ' ' || !/[\p{White_Space}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}]/u.test(char)) continue;
      expect(visibleText(char), cp.toString(16)).not.toBe(char);
    }
  });

  it('quoted text cannot close its quote', () => {
    expect(quotedText('x") Pay 1.00 EUR ("')).toBe('"x\\") Pay 1.00 EUR (\\""');
    expect(quotedText('a\\nb')).toBe('"a\\\\nb"');
    expect(quotedText('a\nb')).toBe('"a\\nb"');
  });
});
