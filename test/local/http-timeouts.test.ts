import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_HTTP_TIMEOUTS } from '../../lambdas/local/server';
import { newKey } from '../support/engine';
import { FixtureTool, startFixtureStack, type FixtureStack } from '../support/fixture-tools';
import { callWrite, connectClient } from '../support/mcp';

/**
 * A client that sends its request a byte at a time holds a connection of the local server until the request
 * timeouts cut it off; a call that takes long to *answer* is not cut off by them. The stack runs with short timeouts
 * here so the test is quick; the defaults are checked against what an MCP call needs.
 */
const TIMEOUTS = { headersMs: 500, requestMs: 1000, checkMs: 100 };

let stack: FixtureStack;
beforeAll(async () => {
  stack = await startFixtureStack({ httpTimeouts: TIMEOUTS });
});
afterAll(() => stack?.stop());

/** Sends `head` then `trickle` one byte every 100 ms; resolves with what the server answered and how much was sent. */
function trickle(head: string, trickled: string): Promise<{ answer: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(stack.url);
    const socket: Socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    socket.on('data', (chunk) => (answer += chunk));
    socket.on('error', () => {});
    socket.once('close', () => {
      clearInterval(timer);
      resolve({ answer, sent });
    });
    socket.once('connect', () => {
      socket.write(head);
      timer = setInterval(() => {
        if (sent === trickled.length) return reject(new Error('the whole request was sent before the server cut it off'));
        if (!socket.destroyed) socket.write(trickled[sent++]!);
      }, 100);
    });
  });
}

describe('the local server and slow clients', () => {
  it('cuts off a body trickled a byte at a time (408), long before it is complete', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', pad: 'x'.repeat(400) });
    // With a valid token: the body is read (a request without one is answered 401 at once).
    const token = await stack.tokenFor('tenant-slow');
    const head =
      `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      `Accept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n`;
    const { answer, sent } = await trickle(head, body);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(sent).toBeLessThan(body.length);
  }, 30_000);

  it('cuts off headers that never finish', async () => {
    const headers = `Host: 127.0.0.1\r\nX-Slow: ${'y'.repeat(400)}\r\n\r\n`;
    const { answer, sent } = await trickle('POST /mcp HTTP/1.1\r\n', headers);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(sent).toBeLessThan(headers.length);
  }, 30_000);

  it('does not cut off a call whose answer takes longer than the request timeout', async () => {
    const client = await connectClient(stack, 'tenant-slow');
    try {
      // The downstream holds its answer past the request timeout (within the tool's downstream timeout, 3 s by
      // default); the request itself arrived at once.
      const key = newKey();
      stack.downstream.arm({ mode: 'commit-then-timeout', delayMs: TIMEOUTS.requestMs + 500 });
      const started = Date.now();
      const booked = await callWrite(client, FixtureTool.write, { idempotency_key: key, note: 'slow' });
      expect(booked).toMatchObject({
        outcome: 'succeeded',
        replayed: false,
        result: { booking_id: stack.downstream.bookings(key)[0]!.booking_id },
      });
      expect(Date.now() - started).toBeGreaterThan(TIMEOUTS.requestMs);
    } finally {
      await client.close();
    }
  }, 30_000);

  it('by default, gives a client seconds to send one MCP request, and checks often', () => {
    expect(LOCAL_HTTP_TIMEOUTS.headersMs).toBeLessThanOrEqual(LOCAL_HTTP_TIMEOUTS.requestMs);
    // Well under the 80 s and 150 s slow clients were seen holding a connection, and well over a 1 MB body on loopback.
    expect(LOCAL_HTTP_TIMEOUTS.requestMs).toBeLessThanOrEqual(30_000);
    expect(LOCAL_HTTP_TIMEOUTS.checkMs).toBeLessThanOrEqual(LOCAL_HTTP_TIMEOUTS.headersMs);
  });
});
