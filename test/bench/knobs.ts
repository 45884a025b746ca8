/** A bench section's settings from the environment (short runs while working on one cell), failing on a bad value. */

/** A comma-separated subset of `all` from the environment; all of them when unset. Fails on a name not in `all`. */
export function listKnob<T extends string>(name: string, all: readonly T[]): T[] {
  const given = process.env[name];
  if (!given) return [...all];
  const picked = given.split(',').map((s) => s.trim());
  const unknown = picked.filter((p) => !all.includes(p as T));
  if (unknown.length > 0) throw new Error(`${name}: ${unknown.join(', ')} is not one of ${all.join(', ')}`);
  return all.filter((a) => picked.includes(a));
}

/** A positive factor from the environment; 1 when unset. */
export function scaleKnob(name: string): number {
  const given = process.env[name];
  if (!given) return 1;
  const scale = Number(given);
  if (!(scale > 0)) throw new Error(`${name}: a positive number, not ${given}`);
  return scale;
}
