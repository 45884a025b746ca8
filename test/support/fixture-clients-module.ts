/**
 * A tools module as a team writes one whose tools call a client of their own: the tool and its reconcile hook take
 * the fixture downstream's client from the services, and `withClients` adds it (built from the environment, once
 * per process: the MCP function and the reconciler each call it at their cold start). The toolkit through its
 * public subpaths only; the client is the tests' own (test/support/fixture-downstream.ts), as a team's would be.
 * The toolkit's tests of `withClients` (test/integration/worker-lambda-handlers.test.ts, mcp-lambda-handler.test.ts)
 * pass this module as the generated entries pass a team's.
 */
import * as z from 'zod';
import { EnvVars, read } from 'idempotent-mcp/lambda';
import { defineWriteTool, type ToolRuntime, type ToolsModule, type WriteToolContext } from 'idempotent-mcp/mcp';
import { fixtureDownstreamClient, found, type Booking, type FixtureDownstreamClient } from './fixture-downstream';

/** The tool's name (its records' storage keys name it). */
export const CLIENT_WRITE = 'fixture_client_write';

/** What this module's tools reach besides the tool runtime. */
export type BookingServices = ToolRuntime & { bookings: FixtureDownstreamClient };

const booked = (b: Booking) => ({ booking_id: b.booking_id, key: b.key });

/** Books a note at the fixture downstream under the idempotency key, through the client `withClients` added. */
export const clientWriteTool = defineWriteTool({
  name: CLIENT_WRITE,
  title: 'Fixture write through a client',
  description: 'Test tool: books a note at the fixture downstream under the idempotency key, with the client its module adds.',
  input: { note: z.string().min(1).max(200) },
  result: z.object({ booking_id: z.string(), key: z.string() }),
  annotations: { destructiveHint: false, openWorldHint: true },
  async execute(args, ctx: WriteToolContext<BookingServices>) {
    return {
      result: booked(
        await ctx.services.bookings.book({ tenant: ctx.tenant, key: ctx.idempotencyKey, kind: 'client-write', payload: args }, ctx.signal),
      ),
    };
  },
  reconcile: async ({ record, signal }, services) =>
    found(await services.bookings.find(record.tenant, record.idempotencyKey, signal), booked),
});

export const tools = [clientWriteTool];

/** The clients of this module's tools: the fixture downstream's at `url`, each request bounded by `timeoutMs`. */
export const bookingClients = (url: string, timeoutMs: number) => ({ bookings: fixtureDownstreamClient(url, timeoutMs) });

/**
 * Adds the tools' clients to the services the toolkit built: the downstream is FIXTURE_DOWNSTREAM_URL, each call
 * bounded by DOWNSTREAM_TIMEOUT_MS (the deployment's setting).
 */
export function withClients<B extends object>(services: B): B & ReturnType<typeof bookingClients> {
  const url = process.env.FIXTURE_DOWNSTREAM_URL;
  if (!url) throw new Error("FIXTURE_DOWNSTREAM_URL is not set: give the fixture downstream's URL");
  return { ...services, ...bookingClients(url, read(process.env, EnvVars.downstreamTimeoutMs)) };
}

// What a team's module is checked against: the tools typed by their services, `withClients` adding those clients.
({ tools, withClients }) satisfies ToolsModule<BookingServices>;
