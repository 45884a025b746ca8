import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { OutboxRuntime, ToolDefinition, ToolRuntime, ToolsModule } from 'idempotent-mcp/mcp';
import { expect, it } from 'vitest';

/**
 * `ToolsModule['withClients']` adds what the endpoint's services lack and nothing more: a module whose services build
 * on `OutboxRuntime`, or use the endpoint's table (`doc`, `tableName`, as the reference endpoint's orders do), fits
 * with a `withClients` that adds only its own clients. The `satisfies` lines are the test: tsc (`npm run typecheck`)
 * checks them.
 */

class Mailer {
  readonly sent: string[] = [];
}
type MailServices = OutboxRuntime & { mailer: Mailer };
type OrderServices = ToolRuntime & { doc: DynamoDBDocumentClient; tableName: string };

const mailTools: ToolDefinition<MailServices>[] = [];
const orderTools: ToolDefinition<OrderServices>[] = [];
const withMailer = <B extends object>(services: B) => ({ ...services, mailer: new Mailer() });

const mailModule = { tools: mailTools, withClients: withMailer } satisfies ToolsModule<MailServices>;
({ tools: orderTools }) satisfies ToolsModule<OrderServices>;
({ tools: orderTools, withClients: withMailer }) satisfies ToolsModule<OrderServices & { mailer: Mailer }>;
// What the endpoint does not hold, `withClients` must add: a module whose tools need a client it leaves out fails.
// @ts-expect-error `mailer` is missing from what withClients returns
({ tools: mailTools, withClients: <B extends object>(services: B) => services }) satisfies ToolsModule<MailServices>;

it("withClients adds the module's clients and keeps everything it is given", () => {
  const given = { tableName: 'records', newEventId: () => 'evt_1' };
  const services = mailModule.withClients(given);
  expect(services.mailer).toBeInstanceOf(Mailer);
  expect(services).toMatchObject(given);
});
