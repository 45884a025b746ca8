import { toolInFlightWindowMs } from '../core/tool-policy';
import { isWriteTool, type ReconcileServices, type ToolDefinition, type ToolRuntime } from '../mcp/tool-types';
import type { ToolReconciler } from './reconciler';

/**
 * The reconciler's view of the write tools: each tool's own `reconcile(request, services)` hook, called with
 * `services` (the reconciler's store, clock and logger plus the clients the tools module adds), its absent policy,
 * and its in-flight window (from its settings and `downstreamTimeoutMs`, as the engine derives it).
 */
export function toolReconcilers<S extends ToolRuntime>(
  tools: readonly ToolDefinition<S>[],
  services: ReconcileServices<S>,
  downstreamTimeoutMs?: number,
): Map<string, ToolReconciler> {
  const reconcilers = new Map<string, ToolReconciler>();
  for (const tool of tools) {
    if (!isWriteTool(tool)) continue;
    const hook = tool.reconcile;
    reconcilers.set(tool.name, {
      onAbsent: tool.onAbsent,
      reconcile: hook && ((request) => hook(request, services)),
      inFlightWindowMs: toolInFlightWindowMs(tool.idempotency, downstreamTimeoutMs, tool.effect),
    });
  }
  return reconcilers;
}
