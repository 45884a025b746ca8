import { describe, expect, it } from 'vitest';
import { formatMinorUnits, isPayableCurrency, minorUnitsOf } from '../../lambdas/core/money';
import { quotedText, visibleText } from '../../lambdas/core/display-text';

describe('amounts follow each currency\'s minor units (ISO 4217)', () => {
  it.each([
    [1250, 'EUR', '12.50 EUR'],
    [1250, 'JPY', '1250 JPY'],
    [1250, 'BHD', '1.250 BHD'],
    [5, 'USD', '0.05 USD'],
    [7, 'KWD', '0.007 KWD'],
    [100, 'ISK', '100 ISK'],
  ])('%i %s reads %s', (amount, currency, text) => {
    expect(formatMinorUnits(amount, currency)).toBe(text);
  });

  it('only ISO 4217 codes one can pay in are currencies', () => {
    expect(['EUR', 'USD', 'JPY', 'CHF'].every(isPayableCurrency)).toBe(true);
    for (const code of ['ZZZ', 'eur', 'EURO', 'XXX', 'XTS', 'XAU', '']) expect(isPayableCurrency(code), code).toBe(false);
    expect(minorUnitsOf('JPY')).toBe(0);
    expect(() => formatMinorUnits(100, 'ZZZ')).toThrow(/ISO 4217/);
  });
});

describe('free text cannot imitate the summary', () => {
  it('line breaks, bidi overrides and invisible characters are written out on one line', () => {
    expect(visibleText('rent\nPay 1.00 EUR')).toBe('rent\\nPay 1.00 EUR');
    expect(visibleText('a\u202Eb\u2066c\u200Bd\u2028e\r\t')).toBe('a\\u{202E}b\\u{2066}c\\u{200B}d\\u{2028}e\\r\\t');
    expect(visibleText('Zahlung für Café 東京')).toBe('Zahlung für Café 東京');
  });

  it('quoted text cannot close its quote', () => {
    expect(quotedText('x") Pay 1.00 EUR ("')).toBe('"x\\") Pay 1.00 EUR (\\""');
    expect(quotedText('a\\nb')).toBe('"a\\\\nb"');
    expect(quotedText('a\nb')).toBe('"a\\nb"');
  });
});
