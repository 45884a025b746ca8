import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { serve, type ServerType } from '@hono/node-server';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import * as z from 'zod';

const run = promisify(execFile);

/** One charge as the billing server booked it, with the credential its request carried. */
export interface Charge {
  customer: string;
  amount_cents: number;
  note: string;
  currency?: string;
  authorization?: string;
}

/**
 * A team's billing MCP server that does not deduplicate (every `charge` books one), on loopback over https with a
 * certificate of its own (openssl; the functions trust it through NODE_EXTRA_CA_CERTS, as a deployed function
 * trusts a vendor's public CA): a deployed gateway accepts only an https upstream. A charge whose note contains
 * `answer-late` is booked at once and answered `lateMs` later (the gateway has given up by then). `withCurrency`
 * changes the tools it lists, as a vendor's release would: `charge` takes an optional `currency`.
 */
export class BillingUpstream {
  readonly charges: Charge[] = [];
  /** The JSON-RPC methods it was asked, in order (tools/list counted by the tests). */
  readonly methods: string[] = [];
  /** The credential (Authorization header) of every request. */
  readonly authorizations = new Set<string>();
  withCurrency = false;
  lateMs = 4_000;
  url = '';
  private server?: ServerType;

  /** A key and a certificate for 127.0.0.1 in `dir`; answers the certificate's path (NODE_EXTRA_CA_CERTS). */
  static async certificate(dir: string): Promise<{ key: string; cert: string }> {
    const key = join(dir, 'upstream.key');
    const cert = join(dir, 'upstream.crt');
    await run('openssl', [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      key,
      '-out',
      cert,
    ]);
    return { key, cert };
  }

  private newServer(): McpServer {
    const server = new McpServer({ name: 'billing', version: this.withCurrency ? '2.0.0' : '1.0.0' });
    server.registerTool(
      'charge',
      {
        description: "Charges a customer's card. Every call books a charge: this server keeps no key.",
        inputSchema: z.object({
          customer: z.string(),
          amount_cents: z.number().int().positive(),
          note: z.string(),
          ...(this.withCurrency ? { currency: z.string().length(3).optional() } : {}),
        }),
        annotations: { idempotentHint: false, destructiveHint: false },
      },
      async (args, extra) => {
        // The v2 SDK's context carries what the HTTP handler was given (`http.authInfo`).
        const authorization = (extra as { http?: { authInfo?: { token?: string } } }).http?.authInfo?.token;
        this.charges.push({ ...(args as Charge), ...(authorization ? { authorization } : {}) });
        if (args.note.includes('answer-late')) await new Promise((resolve) => setTimeout(resolve, this.lateMs));
        return { content: [{ type: 'text', text: `charged ${args.customer} ${args.amount_cents}` }] };
      },
    );
    server.registerTool(
      'list_charges',
      {
        description: "A customer's charges, one note a line.",
        inputSchema: z.object({ customer: z.string() }),
        annotations: { readOnlyHint: true },
      },
      async ({ customer }) => ({
        content: [
          {
            type: 'text',
            text:
              this.charges
                .filter((c) => c.customer === customer)
                .map((c) => c.note)
                .join('\n') || '(none)',
          },
        ],
      }),
    );
    return server;
  }

  async start(tls: { key: string; cert: string }): Promise<void> {
    const handler = createMcpHandler(() => this.newServer());
    this.server = serve({
      hostname: '127.0.0.1',
      port: 0,
      createServer,
      serverOptions: { key: readFileSync(tls.key), cert: readFileSync(tls.cert) },
      fetch: async (request) => {
        const authorization = request.headers.get('authorization') ?? undefined;
        if (authorization) this.authorizations.add(authorization);
        const body: unknown =
          request.method === 'POST'
            ? await request
                .clone()
                .json()
                .catch(() => undefined)
            : undefined;
        for (const message of [body].flat() as Array<{ method?: unknown } | undefined>)
          if (typeof message?.method === 'string') this.methods.push(message.method);
        return handler.fetch(request, authorization ? { authInfo: { token: authorization, clientId: 'gateway', scopes: [] } } : {});
      },
    });
    await new Promise<void>((resolve) => this.server!.once('listening', () => resolve()));
    this.url = `https://127.0.0.1:${(this.server.address() as AddressInfo).port}/mcp`;
  }

  count(method: string): number {
    return this.methods.filter((m) => m === method).length;
  }

  async stop(): Promise<void> {
    const server = this.server as (ServerType & { closeAllConnections?: () => void }) | undefined;
    server?.closeAllConnections?.();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}
