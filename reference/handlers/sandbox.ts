import { Hono } from 'hono';
import { handle } from 'hono/aws-lambda';
import { createDynamoDbClient } from 'idempotent-mcp/dynamodb';
import { read, EnvVars } from 'idempotent-mcp/lambda';
import { loadReferenceConfig } from '../config';
import { createSandboxDownstreams, sandboxLedger } from '../sandbox/downstreams';
import { SandboxStore } from '../sandbox/sandbox-store';

const config = loadReferenceConfig();
const store = new SandboxStore(createDynamoDbClient({ endpoint: read(process.env, EnvVars.dynamodbEndpoint) }), config.sandboxTableName);

/**
 * The sandbox downstreams (payments, tickets, mailbox, faults and their ledger) as a function of their own, for a
 * deployed demo behind the stack's sandbox flag (off by default). Same routes as locally, under /sandbox; it reads
 * only its own table, so the ledger has no `orders` section here (orders live in the service's table).
 */
const sandbox = new Hono();
sandbox.get('/ledger', async (c) => c.json(await sandboxLedger(store)));
sandbox.route(
  '/',
  createSandboxDownstreams({
    store,
    clock: () => Date.now(),
    defaultHoldMs: config.downstreamTimeoutMs + 1000,
    defaultSlowMs: Math.floor(config.downstreamTimeoutMs / 2),
  }),
);
export const handler = handle(new Hono().route('/sandbox', sandbox));
