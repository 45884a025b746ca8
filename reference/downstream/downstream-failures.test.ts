import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MessageRejected, SendEmailCommand, SESv2Client, TooManyRequestsException } from '@aws-sdk/client-sesv2';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TerminalToolError, TransientToolError, UncertainToolError } from 'idempotent-mcp/engine';
import { SesEmailSender } from './ses-email';
import { failureForStatus, requestJson } from './http';
import { PaymentsClient } from './payments';

/**
 * How a downstream failure is classified decides between a retry, a reconciliation and a duplicate: each class is
 * produced here by a real socket doing the real thing (refusing, hanging, resetting), not by a mock.
 */
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/hang') return; // never answers
    if (req.url === '/reset') return req.socket.destroy(); // connection lost after the request was sent
    if (req.url === '/busy') {
      res.writeHead(503, { 'retry-after': '3', 'content-type': 'application/json' });
      return res.end('{}');
    }
    if (req.url === '/boom') {
      res.writeHead(500);
      return res.end('<html>oops</html>');
    }
    if (req.url === '/declined') {
      res.writeHead(402, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ error: { code: 'payment_declined', message: 'limit' } }));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

const call = (url: string, timeoutMs = 2000, signal = new AbortController().signal) =>
  requestJson('the test service', url, { method: 'POST', body: { a: 1 } }, { signal, timeoutMs });

describe('transport failures', () => {
  it('connection refused: nothing was sent, transient', async () => {
    // A port that was just served and is closed again: nothing listens there.
    const closed = createServer();
    await new Promise<void>((done) => closed.listen(0, '127.0.0.1', done));
    const { port } = closed.address() as AddressInfo;
    await new Promise((done) => closed.close(done));
    const err = await call(`http://127.0.0.1:${port}/x`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientToolError);
    expect(err).toMatchObject({ code: 'DOWNSTREAM_UNAVAILABLE' });
  });

  it('no answer within the timeout: it may have happened, uncertain', async () => {
    const err = await call(`${base}/hang`, 200).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UncertainToolError);
    expect(err).toMatchObject({ code: 'DOWNSTREAM_TIMEOUT' });
  });

  it('no answer within the timeout while garbage is collected during the request: still uncertain at the timeout', async () => {
    // Node 20's AbortSignal.any holds its sources weakly: a collected timeout signal would never fire.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const collecting = setInterval(gc, 20);
    try {
      const waited = new Promise<string>((resolve) => setTimeout(() => resolve('still waiting after 3 s'), 3000).unref());
      const err = await Promise.race([call(`${base}/hang`, 300).catch((e: unknown) => e), waited]);
      expect(err).toBeInstanceOf(UncertainToolError);
      expect(err).toMatchObject({ code: 'DOWNSTREAM_TIMEOUT' });
    } finally {
      clearInterval(collecting);
    }
  });

  it("the engine's deadline aborts the call: uncertain", async () => {
    const engine = new AbortController();
    const pending = call(`${base}/hang`, 10_000, engine.signal);
    engine.abort();
    expect(await pending.catch((e: unknown) => e)).toBeInstanceOf(UncertainToolError);
  });

  it('connection reset after the request was sent: uncertain', async () => {
    const err = await call(`${base}/reset`).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UncertainToolError);
    expect(err).toMatchObject({ code: 'DOWNSTREAM_CONNECTION_LOST' });
  });
});

describe('HTTP statuses of a write', () => {
  it('503 with Retry-After: transient, retry after the given time', async () => {
    const err = failureForStatus('svc', await call(`${base}/busy`));
    expect(err).toBeInstanceOf(TransientToolError);
    expect((err as TransientToolError).retryAfterMs).toBe(3000);
  });

  it('500 (even with an unreadable body): uncertain', async () => {
    expect(failureForStatus('svc', await call(`${base}/boom`))).toBeInstanceOf(UncertainToolError);
  });

  it("4xx: terminal, with the downstream's own code", async () => {
    const err = failureForStatus('svc', await call(`${base}/declined`));
    expect(err).toBeInstanceOf(TerminalToolError);
    expect(err).toMatchObject({ code: 'PAYMENT_DECLINED' });
  });

  it('a downstream without a configured URL: transient, nothing sent', async () => {
    const client = new PaymentsClient({ baseUrl: undefined, timeoutMs: 100 });
    const err = await client
      .create(
        { amount_minor: 1, currency: 'EUR', payee_id: 'p' },
        { idempotencyKey: 'k', tenant: 't', signal: new AbortController().signal },
      )
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'DOWNSTREAM_NOT_CONFIGURED' });
    expect(err).toBeInstanceOf(TransientToolError);
  });
});

// SES has no local emulator here: its error answers are the one place a mock stands in for the service.
describe('SES v2 adapter', () => {
  const ses = mockClient(SESv2Client);
  const sender = new SesEmailSender({ from: 'agent@example.com', timeoutMs: 1000, client: new SESv2Client({ region: 'eu-west-1' }) });
  const send = () =>
    sender.send({ to: 'a@example.com', subject: 's', body: 'b' }, { eventId: 'evt_1', tenant: 't', signal: new AbortController().signal });

  it('sends with the event id as a message tag and returns the message id', async () => {
    ses.reset();
    ses.on(SendEmailCommand).resolves({ MessageId: 'ses-1' });
    expect(await send()).toEqual({ message_id: 'ses-1' });
    expect(ses.commandCalls(SendEmailCommand)[0]!.args[0].input).toMatchObject({
      FromEmailAddress: 'agent@example.com',
      Destination: { ToAddresses: ['a@example.com'] },
      EmailTags: [{ Name: 'event_id', Value: 'evt_1' }],
    });
  });

  it('a rejected message is terminal, throttling transient, a server fault uncertain', async () => {
    ses.reset();
    ses
      .on(SendEmailCommand)
      .rejectsOnce(new MessageRejected({ message: 'bad', $metadata: {} }))
      .rejectsOnce(new TooManyRequestsException({ message: 'slow down', $metadata: {} }))
      .rejectsOnce(Object.assign(new Error('internal'), { name: 'InternalFailure', $fault: 'server' }));
    expect(await send().catch((e: unknown) => e)).toBeInstanceOf(TerminalToolError);
    expect(await send().catch((e: unknown) => e)).toBeInstanceOf(TransientToolError);
    expect(await send().catch((e: unknown) => e)).toBeInstanceOf(UncertainToolError);
  });
});
