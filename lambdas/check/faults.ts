import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';

/**
 * What happens to the answer of the next `tools/call` of one tool: `lose` (the server received and ran the call,
 * its answer never reaches the client), or `delay` (the answer arrives `ms` later, after the client gave up).
 */
type AnswerFault = { action: 'lose'; onLost: () => void } | { action: 'delay'; ms: number; onDelivered: () => void };

/** The faults armed for the next call of each tool: each is used up by one call. */
export type FaultPlan = Map<string, AnswerFault>;

const isToolsCall = (message: JSONRPCMessage): message is JSONRPCMessage & { id: string | number; params: { name: string } } =>
  'method' in message && message.method === 'tools/call' && 'id' in message;
const isResponse = (message: JSONRPCMessage): message is JSONRPCMessage & { id: string | number } =>
  !('method' in message) && 'id' in message;

/**
 * A transport that loses or delays the answers the plan names, between the client and the server's transport (HTTP
 * or stdio alike): the request reaches the server unchanged, so the server runs it as it would any call.
 */
export function faultyTransport(inner: Transport, plan: FaultPlan): Transport {
  const held = new Map<string | number, AnswerFault>();
  const deliver = (message: JSONRPCMessage, extra: unknown, handler: (message: JSONRPCMessage, extra?: never) => void) => {
    const fault = isResponse(message) ? held.get(message.id) : undefined;
    if (!fault) return handler(message, extra as never);
    held.delete((message as { id: string | number }).id);
    if (fault.action === 'lose') return fault.onLost();
    setTimeout(() => {
      handler(message, extra as never);
      fault.onDelivered();
    }, fault.ms);
  };
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'send')
        return (message: JSONRPCMessage, options?: unknown) => {
          if (isToolsCall(message)) {
            const fault = plan.get(message.params.name);
            if (fault) {
              plan.delete(message.params.name);
              held.set(message.id, fault);
            }
          }
          return target.send(message, options as never);
        };
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
    set(target, prop, value) {
      if (prop === 'onmessage' && typeof value === 'function') {
        target.onmessage = (message, extra) => deliver(message, extra, value as never);
        return true;
      }
      return Reflect.set(target, prop, value, target);
    },
  });
}
