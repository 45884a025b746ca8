import { code as iso4217 } from 'currency-codes';

/**
 * Money as a person reads it: ISO 4217 says how many minor units each currency has (EUR 2, JPY 0, BHD 3), so an
 * amount in minor units is shown by its own currency's rule, never by dividing by 100. The table is the
 * `currency-codes` package's copy of ISO 4217 (list one).
 */

/**
 * Codes ISO 4217 lists that are no money anyone is paid in, by the table's own marks: no minor unit at all ("N.A.":
 * the metals, the bond market units, the SDR, the Sucre, the ADB unit of account, the testing and "no currency"
 * codes) or a fund ("IsFund": units of account and next-day dollars). The package's table keeps neither mark (it
 * gives "N.A." as 0 digits), so they are listed here; lambdas/core/money-and-text.test.ts derives this set from the
 * package's copy of list one and fails when the two differ.
 */
export const NOT_PAYABLE_CODES: ReadonlySet<string> = new Set([
  // CcyMnrUnts N.A.
  'XAG',
  'XAU',
  'XBA',
  'XBB',
  'XBC',
  'XBD',
  'XDR',
  'XPD',
  'XPT',
  'XSU',
  'XTS',
  'XUA',
  'XXX',
  // IsFund="true"
  'BOV',
  'CHE',
  'CHW',
  'CLF',
  'COU',
  'MXV',
  'USN',
  'UYI',
]);

/**
 * The currency's minor units, or undefined when `code` is not an ISO 4217 currency one can pay in.
 */
export function minorUnitsOf(code: string): number | undefined {
  if (!/^[A-Z]{3}$/.test(code) || NOT_PAYABLE_CODES.has(code)) return undefined;
  const entry = iso4217(code);
  if (!entry || entry.code !== code) return undefined;
  return entry.digits;
}

export const isPayableCurrency = (code: string): boolean => minorUnitsOf(code) !== undefined;

/**
 * Whole numbers grouped by threes with commas (`en-US` is that rule; the locale of the machine plays no part). Made
 * on first use: the process's first Intl object loads ICU's data, which a call that shows no amount never needs.
 */
let grouped: Intl.NumberFormat | undefined;

/**
 * `1250, 'EUR'` → `12.50 EUR`; `1000000000, 'JPY'` → `1,000,000,000 JPY`; `1250, 'BHD'` → `1.250 BHD`: the major
 * units grouped by threes with commas, a point before the minor units. One rule for every currency and every place an
 * amount is shown (the summary is written once and shown on the page, in the form and in the elicitation message), so
 * nothing in it depends on a locale. Throws for a code that is not a currency.
 */
export function formatMinorUnits(amountMinor: number, currency: string): string {
  const digits = minorUnitsOf(currency);
  if (digits === undefined) throw new RangeError(`${currency} is not an ISO 4217 currency`);
  if (!Number.isSafeInteger(amountMinor)) throw new RangeError('the amount must be a whole number of minor units');
  const sign = amountMinor < 0 ? '-' : '';
  const text = Math.abs(amountMinor)
    .toString()
    .padStart(digits + 1, '0');
  const major = (grouped ??= new Intl.NumberFormat('en-US', { useGrouping: true, maximumFractionDigits: 0 })).format(
    BigInt(digits === 0 ? text : text.slice(0, -digits)),
  );
  return `${sign}${digits === 0 ? major : `${major}.${text.slice(-digits)}`} ${currency}`;
}
