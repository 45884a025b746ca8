/**
 * The `_meta` key of a `tools/call` by which a client says it sends this key again (a retry after a lost or
 * unfinished answer, or a re-planned call): the server then reads the key's record before anything else. A hint only:
 * a key found free still runs once, so a wrong or forged one costs a read. The prefix follows MCP's `_meta` naming
 * (reverse-DNS labels, second label neither `modelcontextprotocol` nor `mcp`); the value is `true`.
 */
export const LIKELY_REPLAY_META_KEY = 'dev.idempotent-mcp/likely-replay';

/** Whether a request's `_meta` carries the hint (anything but `true` is no hint). */
export function hasReplayHint(meta: unknown): boolean {
  return typeof meta === 'object' && meta !== null && (meta as Record<string, unknown>)[LIKELY_REPLAY_META_KEY] === true;
}
