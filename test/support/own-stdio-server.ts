/**
 * A team's own stdio MCP server, built as examples/own-mcp-server is (its create_invoice tool and tools module, a
 * tool runtime on DynamoDB, `startReconciler`), whose invoicing system files the first invoice and then times out.
 * Standard output is the protocol channel here. Env: DYNAMODB_ENDPOINT, TABLE_NAME, RECONCILE_INTERVAL_MS.
 */
import { randomUUID } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/server';
import { StdioServerTransport } from '@modelcontextprotocol/server/stdio';
import { createDynamoDbClient, DynamoDbIdempotencyStore } from 'idempotent-mcp/dynamodb';
import { createToolRuntime, registerWriteTool, startReconciler } from 'idempotent-mcp/mcp';
import { createInvoice, invoiceTools } from '../../examples/own-mcp-server/server';
import { TimesOutAfterFiling } from '../../examples/own-mcp-server/test';

const doc = createDynamoDbClient({ endpoint: process.env.DYNAMODB_ENDPOINT });
const store = new DynamoDbIdempotencyStore({ client: doc, tableName: process.env.TABLE_NAME! });
const { tools, withClients } = invoiceTools(new TimesOutAfterFiling());
const services = withClients(createToolRuntime({ store, secret: randomUUID() + randomUUID() }));
const reconciler = startReconciler({
  tools,
  withClients,
  store,
  intervalMs: Number(process.env.RECONCILE_INTERVAL_MS),
  serviceName: 'invoices',
  metrics: { namespace: 'TeamInvoices' },
});

const server = new McpServer({ name: 'invoices', version: '1.0.0' });
registerWriteTool(server, createInvoice, { services, tenant: () => 'acme' });
const transport = new StdioServerTransport();
transport.onclose = () => {
  void reconciler.stop().then(() => doc.destroy());
};
await server.connect(transport);
