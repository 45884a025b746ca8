import type { AppConfig } from '../config';
import { isWriteTool, type ToolDefinition } from '../mcp/tool-types';

/**
 * What `npm start` says about the tools a person must approve or confirm: where the person decides, and, loudly, a
 * tool the operator opted out (CONFIRMATION_OPT_OUT_TOOLS), which then runs for 2025-era clients on the agent's word
 * alone. One line per tool, in the banner's two columns.
 */
export function confirmationNotice(
  tools: readonly ToolDefinition[],
  config: Pick<AppConfig, 'confirmationOptOut' | 'confirmationFormFallback'>,
  baseUrl: string,
): string[] {
  const lines: string[] = [];
  for (const tool of tools) {
    if (!isWriteTool(tool) || tool.confirmation === 'none') continue;
    const optedOut = config.confirmationOptOut.includes(tool.name);
    if (tool.confirmation === 'approval') {
      lines.push(
        `  Approval       ${tool.name}: a signed-in person approves each call at ${baseUrl}/approvals/... (the link comes with the call)`,
      );
      if (optedOut)
        lines.push(
          `  WARNING        ${tool.name} runs WITHOUT anyone's approval for 2025-era clients (curl, SDK 1.x, any 2025 protocol version):`,
          `                 CONFIRMATION_OPT_OUT_TOOLS names it. Unset it to have every payment approved on the page.`,
        );
      if (config.confirmationFormFallback.includes(tool.name))
        lines.push(
          `  Note           ${tool.name}: clients without URL elicitation confirm in their own form (CONFIRMATION_FORM_FALLBACK_TOOLS)`,
        );
    } else {
      lines.push(`  Confirmation   ${tool.name}: the person confirms each call in the MCP client's form (2026-07-28 clients)`);
      if (optedOut)
        lines.push(`  WARNING        ${tool.name} runs WITHOUT a confirmation for 2025-era clients: CONFIRMATION_OPT_OUT_TOOLS names it.`);
    }
  }
  return lines;
}
