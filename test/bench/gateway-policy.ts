/**
 * The policy the bench's gateway runs under, in the throughput section (gateway-server.ts) and the cold-start one
 * (cold-start.ts) alike: `echo` a keyed write with no approval, and a lookup for the reconciler (a team gives one so
 * that a lost answer settles without a person; its lookup rides with the call). No answer is lost in the bench, so
 * the lookup (`get-sum`, a stand-in) is never called. A module of its own, so the gateway's server process loads
 * nothing of the cold-start fixture.
 */
export const GATEWAY_POLICY = {
  tools: {
    echo: {
      kind: 'write',
      timeoutMs: 5000,
      inFlightWindowMs: 1000,
      reconcile: { tool: 'get-sum', arguments: { a: 0, b: 0 }, found: { textIncludes: '{{message}}' } },
    },
    'get-sum': { kind: 'read' },
  },
};
