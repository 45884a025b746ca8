import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An issuer's key set over real HTTP for the verifier's tests: what it serves now, its GETs counted, the next ones
 * refused with 503 on request, and each GET reported to `onGet`.
 */
export interface KeySetServer {
  readonly url: string;
  served: { keys: unknown[] };
  failNext: number;
  gets: number;
  onGet: () => void;
  close(): Promise<void>;
}

export async function startKeySetServer(): Promise<KeySetServer> {
  const server = createServer((_req, res) => {
    keySet.gets++;
    if (keySet.failNext > 0) {
      keySet.failNext--;
      res.writeHead(503);
      res.end();
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(keySet.served));
    }
    keySet.onGet();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const keySet: KeySetServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
    served: { keys: [] },
    failNext: 0,
    gets: 0,
    onGet: () => {},
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return keySet;
}
