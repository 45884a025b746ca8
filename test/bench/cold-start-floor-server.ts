import { randomUUID } from 'node:crypto';
import * as z from 'zod';
import { McpServer, WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/server';

/**
 * The cold-start floor's handler (a peer in test/bench/cold-start.ts): only what any MCP write tool on this stack loads,
 * namely the MCP SDK's server and web-standard transport (v2, the SDK the endpoint is built on), zod and a DynamoDB
 * client, answering the same two Function URL events. Its `create_order` is one PutItem (`putItem`): no auth,
 * idempotency, routing, logs or metrics. Each entry (test/bench/cold-start-floor*.ts) brings its own DynamoDB client.
 */
z.config({ jitless: true });

interface FunctionUrlEvent {
  rawPath: string;
  headers: Record<string, string>;
  body: string;
  requestContext: { domainName: string; http: { method: string } };
}

export const floorHandler =
  (putItem: (tableName: string, item: Record<string, unknown>) => Promise<unknown>) => async (event: FunctionUrlEvent) => {
    // As in lambdas/mcp/server.ts: no Ajv (the bundle stubs it), since no elicitation answer is validated.
    const unused = () => {
      throw new Error('no elicitation');
    };
    const server = new McpServer({ name: 'floor', version: '1.0.0' }, { jsonSchemaValidator: { getValidator: unused } });
    server.registerTool(
      'create_order',
      {
        description: 'Creates an order.',
        inputSchema: z.object({
          idempotency_key: z.string(),
          customer_id: z.string(),
          items: z.array(z.object({ sku: z.string(), quantity: z.number().int().positive() })),
          currency: z.string().length(3),
        }),
      },
      async (args) => {
        const orderId = randomUUID();
        await putItem(process.env.TABLE_NAME!, { pk: `ORDER#floor#${orderId}`, sk: 'ORDER', ...args });
        return { content: [{ type: 'text', text: orderId }], structuredContent: { outcome: 'succeeded', order_id: orderId } };
      },
    );
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    const request = new Request(`https://${event.requestContext.domainName}${event.rawPath}`, {
      method: event.requestContext.http.method,
      headers: event.headers,
      body: event.body,
    });
    const response = await transport.handleRequest(request);
    return { statusCode: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
  };
