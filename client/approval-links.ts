import { spawn } from 'node:child_process';

/*
 * The person's approval as the client meets it: a link in an answer (APPROVAL_REQUIRED) or a URL-mode input
 * request, shown (and, if asked, opened in a browser) while the call waits.
 */

/**
 * An approval link the person must open, sign in at and decide on (MCP URL-mode elicitation).
 *
 * @public
 */
export interface ApprovalLink {
  /** The tool whose call waits for approval: the write tool of the `callWrite` under way ('unknown' outside one). */
  tool: string;
  /** The approval page, e.g. http://127.0.0.1:3000/approvals/<id>. */
  url: string;
  /** What the server asks, summary first (e.g. "Pay 12.50 EUR to payee-7 ..."). */
  message: string;
  /**
   * The approval's id: the URL-mode elicitation's `elicitationId` (absent when the server sent none), or, from an
   * APPROVAL_REQUIRED result, the link's last path segment.
   */
  elicitationId?: string;
  /** True when this link replaces an expired one. */
  renewed: boolean;
}

/** The approval wait of one write call: the links it showed and when the current one was shown. */
export interface ApprovalWait {
  tool: string;
  links: string[];
  shownAt: number;
  /** Set when the wait gave up: why, for the call's status line. */
  gaveUp?: string;
}

/** Raised inside the elicitation handler to end a wait the person did not answer in time. */
export class ApprovalNotGivenError extends Error {}

export const defaultShowLink = (link: ApprovalLink) => {
  process.stderr.write(
    `${link.message.split('\n')[0]}\n${link.renewed ? 'The link expired; a new one: ' : 'Approve or decline it at: '}${link.url}\n`,
  );
};

/**
 * The approval link of a tool result that asks for the person's approval first (APPROVAL_REQUIRED: what a client
 * that answers no URL-mode input request gets, 2025-11-25 among them), if `answer` is one.
 */
export function approvalLinkOf(answer: unknown): { url: string; message: string; elicitationId: string } | undefined {
  const content = (answer as { structuredContent?: { approval_url?: unknown; error?: { code?: unknown; message?: unknown } } } | undefined)
    ?.structuredContent;
  if (content?.error?.code !== 'APPROVAL_REQUIRED' || typeof content.approval_url !== 'string') return undefined;
  // The link's last segment is the approval's id, the one a URL-mode elicitation names.
  const elicitationId = content.approval_url.split('/').at(-1) ?? '';
  return { url: content.approval_url, message: typeof content.error.message === 'string' ? content.error.message : '', elicitationId };
}

/** Opens a URL with the platform's opener; never required, so a missing opener or a failure is ignored. */
export function openInBrowser(url: string): void {
  const [command, args] =
    process.platform === 'darwin' ? ['open', [url]] : process.platform === 'win32' ? ['explorer.exe', [url]] : ['xdg-open', [url]];
  try {
    const child = spawn(command, args, { stdio: 'ignore', detached: true });
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // No opener: the link was shown anyway.
  }
}
