/**
 * Why a JSON-RPC body must be refused as a whole before any of it runs (answered with -32600), or undefined.
 * - An empty batch: JSON-RPC 2.0 calls it an invalid request (there is nothing to answer).
 * - A batch in which two messages share an id: their answers could not be told apart, and the SDK answers only
 *   one of them while still running both, so a write could commit with no one ever told its outcome.
 * - A batch with an id that is not a string, a number or null (JSON-RPC 2.0): an object or an array nested
 *   thousands deep would otherwise reach code that walks it recursively. Checked by type alone, at any depth.
 * Everything else (single messages, the shape of each message) is the SDK's to check.
 */
export function batchRefusal(body: unknown): string | undefined {
  if (!Array.isArray(body)) return undefined;
  if (body.length === 0) return 'Invalid Request: empty batch';
  const ids = new Set<string>();
  for (const message of body) {
    if (!message || typeof message !== 'object' || !('id' in message)) continue; // notifications carry no id
    const given = (message as { id: unknown }).id;
    if (given !== null && typeof given !== 'string' && typeof given !== 'number')
      return 'Invalid Request: a JSON-RPC id is a string, a number or null; nothing in this batch was run';
    // JSON text tells 1 from "1", as JSON-RPC does.
    const id = JSON.stringify(given);
    if (ids.has(id))
      return `Invalid Request: the id ${id.length > 40 ? `${id.slice(0, 40)}…` : id} is used more than once in this batch; nothing was run`;
    ids.add(id);
  }
  return undefined;
}
