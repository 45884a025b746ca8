import { getEventListeners } from 'node:events';

/**
 * Watches the abort listeners of every AbortSignal given one from now on (fetch adds its listener with the signal's
 * own `addEventListener`), so a test sees the listeners on a signal it cannot reach, such as the one an MCP SDK
 * transport gives every request of its connection. `mostHeld`: the most any of them holds now.
 */
export function watchAbortListeners(): { mostHeld(): number; stop(): void } {
  const signals = new Set<AbortSignal>();
  const add = EventTarget.prototype.addEventListener;
  Object.defineProperty(AbortSignal.prototype, 'addEventListener', {
    configurable: true,
    writable: true,
    value(this: AbortSignal, ...args: Parameters<EventTarget['addEventListener']>) {
      if (args[0] === 'abort') signals.add(this);
      return add.apply(this, args);
    },
  });
  return {
    mostHeld: () => Math.max(0, ...[...signals].map((signal) => getEventListeners(signal, 'abort').length)),
    stop: () => {
      delete (AbortSignal.prototype as { addEventListener?: unknown }).addEventListener;
      signals.clear();
    },
  };
}
