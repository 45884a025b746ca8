import { TerminalToolError, TransientToolError, UncertainToolError } from 'idempotent-mcp/engine';
import type { DeliveryHandler } from 'idempotent-mcp/mcp';

/**
 * How the endpoint's outbox consumer performs the events the tools in ./tools.ts commit, by event type. The
 * consumer claims each event before `deliver` runs, so a redelivered message does not post twice; the event id is
 * passed on as the chat's idempotency key for the one case a claim cannot cover (a crash mid-post).
 */
export const deliveries: Record<string, DeliveryHandler> = {
  'room.announce': {
    async deliver(message, { signal }) {
      const webhook = process.env.ROOMS_CHAT_WEBHOOK;
      if (!webhook) throw new TransientToolError('CHAT_NOT_CONFIGURED', 'ROOMS_CHAT_WEBHOOK is not set');
      const response = await fetch(webhook, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': message.event_id },
        body: JSON.stringify({ text: (message.payload as { text: string }).text }),
        signal,
      }).catch((err: unknown) => {
        throw new UncertainToolError('CHAT_UNREACHABLE', `the chat did not answer: ${(err as Error).message}`);
      });
      if (response.status >= 500) throw new UncertainToolError('CHAT_FAILED', `the chat answered ${response.status}`);
      if (!response.ok) throw new TerminalToolError('CHAT_REFUSED', `the chat answered ${response.status}`);
      return { posted: true };
    },
  },
};
