/**
 * A moment as a person reads it on a page with no script (so no local time zone): the UTC date and time with its
 * zone, and how far it is from now, e.g. `2026-12-04 19:20:00 UTC (in 15 minutes)` or `… (2 minutes ago)`.
 */
// Made on first use: the process's first Intl object loads ICU's data, which only a page showing a time needs.
let relative: Intl.RelativeTimeFormat | undefined;
const UNITS: [Intl.RelativeTimeFormatUnit, number][] = [
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1000],
];

export function fromNow(at: number, now: number): string {
  const diff = at - now;
  // The largest unit that fits twice (90 minutes reads "in 2 hours" less truly than "in 90 minutes").
  const [unit, ms] = UNITS.find(([, size]) => Math.abs(diff) >= 2 * size) ?? ['second', 1000];
  return (relative ??= new Intl.RelativeTimeFormat('en', { numeric: 'auto' })).format(Math.round(diff / ms), unit);
}

export function whenText(at: number, now: number): string {
  return `${new Date(at).toISOString().slice(0, 19).replace('T', ' ')} UTC (${fromNow(at, now)})`;
}
