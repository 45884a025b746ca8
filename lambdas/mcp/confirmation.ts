import * as z from 'zod';
import { chooseConfirmation, type Confirmation, type ConfirmingProtocol, type UnavailableReason } from './confirmation-choice';
import type { ConfirmationRequirement } from '../confirmation/gate';
import type { ToolCall, ToolRuntime } from './tool-types';

/**
 * The MCP side of a person's confirmation: what a request says (its protocol version, the client's elicitation
 * capabilities, the round it answers), the operator's lists, and the rule of who is asked how
 * (confirmation-choice.ts), made into the requirement the engine's protocol-neutral gate takes
 * (lambdas/confirmation/gate.ts), with the sentence for a client nobody can be asked through. The gate's ask goes back
 * to MCP in define-write-tool.ts, with the rest of the engine's answers.
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

/** Why nobody can be asked, in one sentence for the agent: what works instead. */
function unavailableMessage(reason: UnavailableReason, tool: string): string {
  switch (reason) {
    case 'no_approval_page':
      return `${tool} runs only after the person approves it on this endpoint's approval page, and this server has no approval page configured; nothing ran.`;
    case 'protocol_cannot_answer':
      return (
        `${tool} runs only after the person confirms it, and this server asks through an MCP 2026-07-28 input request, ` +
        'which a client of an earlier protocol version cannot answer; nothing ran. Use a client that speaks MCP 2026-07-28 ' +
        'and can show a form (elicitation), for example Claude Code or Claude Desktop; or, where this client asks the person ' +
        `itself, the operator lists ${tool} in CONFIRMATION_OPT_OUT_TOOLS (deployed: the confirmationOptOut setting).`
      );
    case 'no_form_elicitation':
      return (
        `${tool} runs only after the person confirms it in a form, and this client declares no form elicitation capability; nothing ran. ` +
        'Use a client that declares elicitation (form mode), for example Claude Code or Claude Desktop.'
      );
  }
}

/**
 * A confirmation tool's requirement for this MCP request, in the engine's terms: how this client's person is asked
 * (the choice, confirmation-choice.ts), or why nobody can be. Undefined when the operator opted the tool out for this
 * client: it runs as a tool without confirmation (the engine's gate is not asked).
 */
export function confirmationRequirement(
  mode: Exclude<Confirmation, 'none'>,
  summary: string,
  tool: string,
  call: ToolCall<ToolRuntime>,
): ConfirmationRequirement | undefined {
  const { services } = call;
  const protocol: ConfirmingProtocol =
    call.era === 'modern' ? '2026-07-28' : call.protocolVersion === '2025-11-25' ? '2025-11-25' : 'earlier';
  const choice = chooseConfirmation({
    mode,
    protocol,
    canElicitUrls: call.canElicitUrls === true,
    canElicitForms: call.canElicitForms === true,
    approvalPage: services.approvals !== undefined,
    optedOut: services.config.confirmationOptOut.includes(tool),
    formFallback: services.config.confirmationFormFallback?.includes(tool) === true,
  });
  if (choice.kind === 'run') return undefined;
  if (choice.kind === 'unavailable') return { how: 'nobody', why: unavailableMessage(choice.reason, tool) };
  const raw = call.inputResponses?.[CONFIRM_INPUT];
  let formAnswer: 'yes' | 'no' | undefined;
  if (raw !== undefined) {
    const answer = ConfirmAnswer.safeParse(raw);
    formAnswer = answer.success && answer.data.action === 'accept' && answer.data.content?.confirm === true ? 'yes' : 'no';
  }
  return {
    how: choice.kind,
    summary,
    requestState: call.requestState,
    formAnswer,
    pageBase: services.config.approvalBaseUrl ?? services.config.publicBaseUrl ?? call.origin,
  };
}
