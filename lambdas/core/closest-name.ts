/** Edit distance, case-insensitive: how far a misspelled name is from a known one. */
function distance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let previous = Array.from({ length: y.length + 1 }, (_, i) => i);
  for (let i = 1; i <= x.length; i++) {
    const current = [i];
    for (let j = 1; j <= y.length; j++)
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1));
    previous = current;
  }
  return previous[y.length]!;
}

/**
 * The known name closest to a misspelled one (a context key, a tool name), for a "did you mean" hint. With
 * `within`, only a name at most that many edits away: a hint to an unrelated name would mislead more than none.
 */
export function closestName(name: string, known: Iterable<string>, options: { within?: number } = {}): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(name, candidate);
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return options.within === undefined || bestDistance <= options.within ? best : undefined;
}
