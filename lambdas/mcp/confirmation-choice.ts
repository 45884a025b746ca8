/**
 * How a person confirms an operation before it runs, chosen from the tool's mode, what the client can do and what the
 * operator allows: the one rule (docs/confirmation.md, "What each client gets"). Pure, at the MCP edge (its inputs are the protocol's): the engine's confirmation gate
 * (lambdas/confirmation/gate.ts) acts on the choice.
 */

/**
 * 'approval': the person approves each operation on the endpoint's own approval page, signed in (MCP URL-mode
 * elicitation): what the MCP specification requires for authorizing transactions, and the only mode no agent host
 * can answer for the person (payments). 'required': the person confirms in a form the MCP client shows (the
 * client's word). 'none' (default): the tool runs on the agent's call.
 */
export type Confirmation = 'approval' | 'required' | 'none';

/**
 * The client's protocol as far as confirming goes: '2026-07-28' answers input requests (URL or form mode, as it
 * declares); '2025-11-25' and 'earlier' answer none (a stateless server cannot see what a 2025 client declared at
 * `initialize`): they get the approval link as a tool result.
 */
export type ConfirmingProtocol = '2026-07-28' | '2025-11-25' | 'earlier';

export interface ConfirmationChoiceInput {
  mode: Exclude<Confirmation, 'none'>;
  protocol: ConfirmingProtocol;
  /** The 2026-07-28 client declared URL-mode elicitation (ignored for earlier protocols: they declare nothing we can see). */
  canElicitUrls: boolean;
  /** The 2026-07-28 client declared form-mode elicitation. */
  canElicitForms: boolean;
  /** The server keeps people's decisions (an approval store): without it there is no approval page. */
  approvalPage: boolean;
  /** The operator lists the tool in CONFIRMATION_OPT_OUT_TOOLS: 2025-era clients confirm on their side. */
  optedOut: boolean;
  /** The operator lists the tool in CONFIRMATION_FORM_FALLBACK_TOOLS: a form may stand in for the page. */
  formFallback: boolean;
}

/** Why nobody can be asked: each has its own sentence (confirmation.ts, beside this file). */
export type UnavailableReason =
  /** 'approval' on a server with no approval page. */
  | 'no_approval_page'
  /** 'required', a 2025-era client: that era has no input round. */
  | 'protocol_cannot_answer'
  /** 'required', a 2026-07-28 client without form elicitation. */
  | 'no_form_elicitation';

export type ConfirmationChoice =
  /** The person decides on the approval page (signed in), sent there by a URL-mode input request. */
  | { kind: 'page' }
  /**
   * The person decides on the same page, and the client, which cannot send them there itself (no URL-mode
   * elicitation: form only, none, a 2025-era client), gets the link as a tool result (APPROVAL_REQUIRED) to show.
   */
  | { kind: 'link' }
  /** The client shows the person a form (the client's word). */
  | { kind: 'form' }
  /** The operator opted the tool out for this client: it runs without a confirmation by this server. */
  | { kind: 'run' }
  /** Nobody can be asked here: nothing runs. */
  | { kind: 'unavailable'; reason: UnavailableReason };

export function chooseConfirmation(input: ConfirmationChoiceInput): ConfirmationChoice {
  const { mode, protocol } = input;
  if (mode === 'approval') {
    if (!input.approvalPage) return { kind: 'unavailable', reason: 'no_approval_page' };
    if (protocol === '2026-07-28') {
      if (input.canElicitUrls) return { kind: 'page' };
      // The operator's opt-in: the client's form stands in for the page (the client's word, not a signed-in person's).
      if (input.canElicitForms && input.formFallback) return { kind: 'form' };
      return { kind: 'link' };
    }
    // The operator's choice first: clients of this deployment confirm on their side.
    if (input.optedOut) return { kind: 'run' };
    // A tool result, not 2025-11-25's URL-elicitation-required error: a client may hide a JSON-RPC error, and the
    // server cannot see whether this one declared URL elicitation.
    return { kind: 'link' };
  }
  if (protocol !== '2026-07-28') return input.optedOut ? { kind: 'run' } : { kind: 'unavailable', reason: 'protocol_cannot_answer' };
  return input.canElicitForms ? { kind: 'form' } : { kind: 'unavailable', reason: 'no_form_elicitation' };
}
