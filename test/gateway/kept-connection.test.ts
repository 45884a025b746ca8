import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { IdempotentMcpClient } from '../../client/idempotent-client';
import { connectUpstream } from '../../lambdas/gateway/upstream';
import { watchAbortListeners } from '../support/abort-listeners';
import { startEverything } from './registry-servers';

/**
 * A connection kept across calls (the gateway's upstream connection in a warm Lambda, an agent's client session)
 * leaves no abort listener behind per call: the SDK's transport gives every request the same signal, and each
 * request's own signal takes fetch's listener instead. Against @modelcontextprotocol/server-everything (streamable
 * HTTP, from the registry), with the listeners of every signal watched while the calls run.
 */
const CALLS = 300;
let everything: Awaited<ReturnType<typeof startEverything>>;
let watch: ReturnType<typeof watchAbortListeners>;

beforeAll(async () => {
  everything = await startEverything();
});
afterAll(() => everything?.stop());
beforeEach(() => {
  watch = watchAbortListeners();
});
afterEach(() => watch.stop());

it(`the gateway's upstream connection: ${CALLS} calls over one credential leave no signal with listeners piling up`, async () => {
  const upstream = connectUpstream({ url: everything.url });
  const credential = { header: { name: 'Authorization', value: 'Bearer gateway-credential' } };
  try {
    for (let i = 0; i < CALLS; i++) {
      const answer = await upstream.callTool(credential, 'echo', { message: `call ${i}` }, { timeoutMs: 5000 });
      expect(answer.content).toEqual([{ type: 'text', text: `Echo: call ${i}` }]);
    }
    // The event stream the transport keeps open is linked while it lasts; the calls left nothing.
    expect(watch.mostHeld()).toBeLessThanOrEqual(2);
  } finally {
    await upstream.close();
  }
});

it(`the agent's client session: ${CALLS} calls leave no signal with listeners piling up`, async () => {
  const client = new IdempotentMcpClient({ url: everything.url, protocolEra: 'legacy' });
  try {
    for (let i = 0; i < CALLS; i++) expect((await client.callRead('echo', { message: `call ${i}` })).text).toBe(`Echo: call ${i}`);
    expect(watch.mostHeld()).toBeLessThanOrEqual(2);
  } finally {
    await client.close();
  }
});
