import { code as iso4217 } from 'currency-codes';

/** Digits of an ISO 4217 currency's minor unit (2 for EUR, 0 for JPY, 3 for BHD); undefined for none (XAU, XXX). */
export function minorDigitsOf(currency: string): number | undefined {
  const digits = /^[A-Z]{3}$/.test(currency) ? iso4217(currency)?.digits : undefined;
  return typeof digits === 'number' && Number.isInteger(digits) ? digits : undefined;
}

/** `1250, 'EUR'` -> `12.50 EUR`: the amount as the person approving a payment reads it (exact, no float rounding). */
export function formatMinorUnits(amountMinor: number, currency: string): string {
  const digits = minorDigitsOf(currency);
  if (digits === undefined || !Number.isSafeInteger(amountMinor)) throw new RangeError(`${amountMinor} ${currency} is not an amount`);
  const text = Math.abs(amountMinor)
    .toString()
    .padStart(digits + 1, '0');
  const major = BigInt(text.slice(0, text.length - digits)).toLocaleString('en-US');
  return `${amountMinor < 0 ? '-' : ''}${digits === 0 ? major : `${major}.${text.slice(-digits)}`} ${currency}`;
}
