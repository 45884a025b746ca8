import type { OutboxMessage } from 'idempotent-mcp/dynamodb';
import type { ReconcileFinding } from 'idempotent-mcp/engine';
import type { DeliveryHandler } from 'idempotent-mcp/mcp';
import type { EmailMessage, EmailSender } from '../downstream/email';
import type { TicketRequest, TicketsClient } from '../downstream/tickets';

/** Outbox event types: the tool that commits the event and the handler that performs it agree on these. */
export const EventType = {
  SendEmail: 'email.send',
  CreateTicket: 'ticket.create',
} as const;

const found = (result: unknown | undefined): ReconcileFinding => (result ? { kind: 'found', result } : { kind: 'absent' });

/** The effects behind the outbox tools; each passes the event id downstream as its reference. */
export function createDeliveryHandlers(downstreams: { email: EmailSender; tickets: TicketsClient }): Record<string, DeliveryHandler> {
  const { email, tickets } = downstreams;
  return {
    [EventType.SendEmail]: {
      deliver: (m: OutboxMessage, ctx) =>
        email.send(m.payload as unknown as EmailMessage, { eventId: m.event_id, tenant: m.tenant, signal: ctx.signal }),
      // SES cannot be searched by our reference: there, an attempt that may have happened is sent again.
      ...(email.find ? { verify: async (m: OutboxMessage, ctx) => found(await email.find!(m.event_id, ctx)) } : {}),
    },
    [EventType.CreateTicket]: {
      deliver: (m, ctx) =>
        tickets.create(m.payload as unknown as TicketRequest, { externalId: m.event_id, tenant: m.tenant, signal: ctx.signal }),
      verify: async (m, ctx) => found(await tickets.findByExternalId(m.event_id, ctx)),
    },
  };
}
