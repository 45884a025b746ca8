import { UncertainToolError } from 'idempotent-mcp/engine';
import { baseUrlOf, DownstreamErrorCode, failureForStatus, LookupFailedError, lookupJson, requestJson, type CallOptions } from './http';

type TicketPriority = 'low' | 'normal' | 'high' | 'urgent';

export interface TicketRequest {
  title: string;
  description: string;
  priority: TicketPriority;
}

export interface Ticket {
  ticket_id: string;
}

const SERVICE = 'the ticket system';

function toTicket(body: unknown): Ticket | undefined {
  const id = (body as { ticket_id?: unknown } | undefined)?.ticket_id;
  return typeof id === 'string' ? { ticket_id: id } : undefined;
}

/**
 * A ticket system without idempotency: every POST opens a new ticket. It stores an `external_id` (we pass the
 * outbox event id) and can be searched by it (as Zendesk's external_id or Jira's JQL on a custom field), which is
 * how a delivery that may have happened is verified before it is tried again.
 */
export class TicketsClient {
  constructor(private readonly options: { baseUrl: string | undefined; timeoutMs: number }) {}

  async create(ticket: TicketRequest, call: CallOptions & { externalId: string; tenant: string }): Promise<Ticket> {
    const result = await requestJson(
      SERVICE,
      `${baseUrlOf(SERVICE, this.options.baseUrl)}/v1/tickets`,
      { method: 'POST', body: { ...ticket, external_id: call.externalId, metadata: { tenant: call.tenant } } },
      { signal: call.signal, timeoutMs: this.options.timeoutMs },
    );
    if (result.status === 200 || result.status === 201) {
      const created = toTicket(result.body);
      if (created) return created;
      throw new UncertainToolError(DownstreamErrorCode.ERROR, `${SERVICE} answered with an unreadable ticket`);
    }
    throw failureForStatus(SERVICE, result);
  }

  /** The ticket carrying this external id, or undefined when there is none. Throws LookupFailedError. */
  async findByExternalId(externalId: string, call: CallOptions): Promise<Ticket | undefined> {
    const url = `${baseUrlOf(SERVICE, this.options.baseUrl)}/v1/tickets?external_id=${encodeURIComponent(externalId)}`;
    const result = await lookupJson(SERVICE, url, { signal: call.signal, timeoutMs: this.options.timeoutMs });
    if (result.status !== 200) throw new LookupFailedError(SERVICE, `HTTP ${result.status}`);
    const tickets = (result.body as { tickets?: unknown[] } | undefined)?.tickets;
    if (!Array.isArray(tickets)) throw new LookupFailedError(SERVICE, 'unreadable answer');
    return tickets.length > 0 ? toTicket(tickets[0]) : undefined;
  }
}
