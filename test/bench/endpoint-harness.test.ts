import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { checkedResult, measureEndpoint } from './endpoint';
import { TENANT } from './floor';
import { orderIdFor } from '../../reference/tools/orders';

/**
 * The `endpoint` section of `npm run bench` measures what it says only if both servers really answered the tool
 * and the replays really replayed: a tiny run (a few requests per turn, no timing asserted) checks the harness.
 */
describe('the endpoint bench harness', () => {
  it('loads both servers and the DynamoDB floor, and every answer counted is the tool result the load asked for', async () => {
    const f = await measureEndpoint({ dynamodbEndpoint: inject('dynamodbEndpoint'), rounds: 1, connections: 2, requestsPerTurn: 6 });
    const cells = {
      ...Object.fromEntries(Object.entries(f.endpoint).map(([load, c]) => [`endpoint.${load}`, c])),
      ...Object.fromEntries(Object.entries(f.bare).map(([load, c]) => [`bare.${load}`, c])),
      'floor.first_call': f.dynamodb_floor.engine.first_call,
      'floor.replay': f.dynamodb_floor.engine.replay,
      'floor.put': f.dynamodb_floor.put,
    };
    for (const [name, cell] of Object.entries(cells)) {
      expect({ name, calls: cell.calls, unexpected: cell.unexpected, errors: cell.errors }).toEqual({
        name,
        calls: 6,
        unexpected: 0,
        errors: 0,
      });
      expect(cell.calls_per_s).toBeGreaterThan(0);
    }
    // Each server reported the CPU its turns took (the floor's cells run in this process and have none).
    for (const server of [f.endpoint, f.bare])
      for (const cell of Object.values(server)) expect(cell.server_cpu_ms_per_call).toBeGreaterThan(0);
    expect(f.dynamodb_floor.put.server_cpu_ms_per_call).toBeUndefined();

    // The endpoint executed a fresh key, and replayed a key it had executed: the order is the key's own.
    const first = f.endpoint.first_call.sample!;
    expect(first.result).toMatchObject({
      outcome: 'succeeded',
      replayed: false,
      result: { order_id: orderIdFor(TENANT, 'create_order', first.key), status: 'created' },
    });
    const replay = f.endpoint.replay.sample!;
    expect(replay.result).toMatchObject({
      outcome: 'succeeded',
      replayed: true,
      result: { order_id: orderIdFor(TENANT, 'create_order', replay.key) },
    });
    // The bare server answered the same tool with the order it wrote.
    for (const load of ['first_call', 'replay'] as const)
      expect(f.bare[load].sample!.result).toMatchObject({
        order_id: expect.any(String),
        status: 'created',
        customer_id: 'cust-0042',
        currency: 'EUR',
      });
  }, 120_000);

  it("counts an answer that is not the load's as unexpected", () => {
    const answer = (structuredContent: unknown) => JSON.stringify({ jsonrpc: '2.0', id: 1, result: { structuredContent } });
    const executed = { outcome: 'succeeded', replayed: false, result: { order_id: 'ord_1' } };
    expect(checkedResult('endpoint', 'first_call', 200, answer(executed))).toEqual(executed);
    expect(checkedResult('endpoint', 'replay', 200, answer(executed))).toBeUndefined();
    expect(checkedResult('endpoint', 'first_call', 200, answer({ ...executed, replayed: true }))).toBeUndefined();
    expect(checkedResult('endpoint', 'first_call', 200, answer({ outcome: 'rejected', replayed: false }))).toBeUndefined();
    expect(checkedResult('endpoint', 'first_call', 401, answer(executed))).toBeUndefined();
    expect(checkedResult('bare', 'first_call', 200, answer({ order_id: 'ord_2' }))).toEqual({ order_id: 'ord_2' });
    expect(
      checkedResult('bare', 'first_call', 200, JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'bad' } })),
    ).toBeUndefined();
    expect(checkedResult('bare', 'first_call', 200, 'not json')).toBeUndefined();
  });
});
