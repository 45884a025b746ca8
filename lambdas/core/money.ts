import { code as iso4217 } from 'currency-codes';

/**
 * Money as a person reads it: ISO 4217 says how many minor units each currency has (EUR 2, JPY 0, BHD 3), so an
 * amount in minor units is shown by its own currency's rule, never by dividing by 100. The table is the
 * `currency-codes` package's copy of ISO 4217 (list one).
 */

/** Codes ISO 4217 lists that are no money anyone is paid in: metals, bond units, the testing and "no currency" codes. */
const notPayable = (countries: readonly string[]) => countries.some((country) => /^zz\d/i.test(country));

/** The currency's minor units, or undefined when `code` is not an ISO 4217 currency one can pay in. */
export function minorUnitsOf(code: string): number | undefined {
  if (!/^[A-Z]{3}$/.test(code)) return undefined;
  const entry = iso4217(code);
  if (!entry || entry.code !== code || notPayable(entry.countries)) return undefined;
  return entry.digits;
}

export const isPayableCurrency = (code: string): boolean => minorUnitsOf(code) !== undefined;

/**
 * `1250, 'EUR'` → `12.50 EUR`; `1250, 'JPY'` → `1250 JPY`; `1250, 'BHD'` → `1.250 BHD`. Digits only, with no
 * grouping separators, so nothing in the amount depends on a locale. Throws for a code that is not a currency.
 */
export function formatMinorUnits(amountMinor: number, currency: string): string {
  const digits = minorUnitsOf(currency);
  if (digits === undefined) throw new RangeError(`${currency} is not an ISO 4217 currency`);
  if (!Number.isSafeInteger(amountMinor)) throw new RangeError('the amount must be a whole number of minor units');
  const sign = amountMinor < 0 ? '-' : '';
  const text = Math.abs(amountMinor).toString().padStart(digits + 1, '0');
  const major = digits === 0 ? text : `${text.slice(0, -digits)}.${text.slice(-digits)}`;
  return `${sign}${major} ${currency}`;
}
