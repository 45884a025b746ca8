import { isWriteTool, type ReconcileServices, type ToolDefinition, type ToolRuntime } from '../mcp/tool-types';
import type { ToolReconciler } from './reconciler';

/**
 * The reconciler's view of the write tools: each tool's own `reconcile(request, services)` hook, called with
 * `services` (the reconciler's store, clock and logger plus the clients the tools module adds), and its absent policy.
 */
export function toolReconcilers<S extends ToolRuntime>(
  tools: readonly ToolDefinition<S>[],
  services: ReconcileServices<S>,
): Map<string, ToolReconciler> {
  const reconcilers = new Map<string, ToolReconciler>();
  for (const tool of tools) {
    if (!isWriteTool(tool)) continue;
    const hook = tool.reconcile;
    reconcilers.set(tool.name, { onAbsent: tool.onAbsent, reconcile: hook && ((request) => hook(request, services)) });
  }
  return reconcilers;
}
