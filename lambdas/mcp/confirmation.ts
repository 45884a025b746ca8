import * as z from 'zod';
import type { Confirmation, ConfirmingProtocol } from './confirmation-choice';
import type { ConfirmationRequirement } from '../confirmation/gate';
import type { ToolCall, ToolRuntime } from './tool-types';

/**
 * The MCP side of a person's confirmation: what a request says (its protocol version, the client's elicitation
 * capabilities, the round it answers), as the engine's confirmation gate takes it (lambdas/confirmation/gate.ts
 * decides; lambdas/mcp/confirmation-choice.ts is the rule of who is asked how). The answer goes back to MCP in
 * define-write-tool.ts, with the rest of the engine's answers.
 */

/** The key of the one input request of a confirmation round, in `inputRequests` and in the answer's `inputResponses`. */
export const CONFIRM_INPUT = 'confirm';

/** The form the person answers: one explicit yes. */
export const CONFIRM_FORM = {
  type: 'object' as const,
  properties: {
    confirm: { type: 'boolean' as const, title: 'Yes, do it', description: 'Tick to confirm this operation.', default: false },
  },
  required: ['confirm'],
};

/** The client's answer to the form (`ElicitResult`): only `accept` with `confirm: true` is a yes. */
const ConfirmAnswer = z.looseObject({
  action: z.enum(['accept', 'decline', 'cancel']),
  content: z.looseObject({ confirm: z.unknown() }).optional(),
});

/** Whether the client of a 2026-07-28 request can send the person to a URL: it declares `elicitation: { url: {} }`. */
export function canElicitUrls(capabilities: unknown): boolean {
  const elicitation = (capabilities as { elicitation?: unknown } | undefined)?.elicitation;
  return elicitation !== null && typeof elicitation === 'object' && (elicitation as { url?: unknown }).url !== undefined;
}

/** Whether the client of a 2026-07-28 request can show a form: `elicitation: {}` means form mode (MCP). */
export function canElicitForms(capabilities: unknown): boolean {
  const elicitation = (capabilities as { elicitation?: unknown } | undefined)?.elicitation;
  if (elicitation === null || typeof elicitation !== 'object') return false;
  const modes = elicitation as { form?: unknown; url?: unknown };
  return modes.form !== undefined || modes.url === undefined;
}

/** A confirmation tool's requirement for this MCP request, in the engine's terms. */
export function confirmationRequirement(
  mode: Exclude<Confirmation, 'none'>,
  summary: string,
  tool: string,
  call: ToolCall<ToolRuntime>,
): ConfirmationRequirement {
  const { services } = call;
  const protocol: ConfirmingProtocol =
    call.era === 'modern' ? '2026-07-28' : call.protocolVersion === '2025-11-25' ? '2025-11-25' : 'earlier';
  const raw = call.inputResponses?.[CONFIRM_INPUT];
  let formAnswer: ConfirmationRequirement['formAnswer'];
  if (raw !== undefined) {
    const answer = ConfirmAnswer.safeParse(raw);
    formAnswer = answer.success && answer.data.action === 'accept' && answer.data.content?.confirm === true ? 'yes' : 'no';
  }
  return {
    mode,
    summary,
    client: {
      protocol,
      protocolVersion: call.protocolVersion,
      canElicitUrls: call.canElicitUrls === true,
      canElicitForms: call.canElicitForms === true,
    },
    optedOut: services.config.confirmationOptOut.includes(tool),
    formFallback: services.config.confirmationFormFallback?.includes(tool) === true,
    requestState: call.requestState,
    formAnswer,
    pageBase: services.config.approvalBaseUrl ?? services.config.publicBaseUrl ?? call.origin,
    ports: {
      approvals: services.approvals,
      confirmations: services.confirmations,
      clock: services.clock,
      logger: services.logger,
      approvalTtlSeconds: services.config.approvalTtlSeconds,
    },
  };
}
