import { loadWorkerConfig } from '../config';
import { withMetrics } from '../observability/metrics';
import type { DeliveryHandler } from '../outbox/consumer';
import { createConsumerHandler } from '../runtime/worker-events';
import { createWorkerServices } from '../runtime/worker-services';
import { createConsumer } from '../runtime/workers';

/** A team's deliveries module as loaded (`consumerLambdaHandler`'s `module`). */
type DeliveriesModule = Parameters<typeof consumerLambdaHandler>[0];

/**
 * The delivery handlers of a deliveries module by event type, or an error naming what is wrong (at cold start).
 * The constructs run the same check on your deliveries module at synth.
 */
export function deliveriesOf(module: DeliveriesModule): Readonly<Record<string, DeliveryHandler>> {
  const deliveries = module.deliveries ?? module.default;
  const problem = (() => {
    if (deliveries === null || typeof deliveries !== 'object' || Array.isArray(deliveries))
      return 'an object of delivery handlers by event type';
    for (const [type, handler] of Object.entries(deliveries)) {
      if (typeof (handler as DeliveryHandler | undefined)?.deliver !== 'function')
        return `a handler with deliver() for every event type (${JSON.stringify(type)} has none)`;
      const verify = (handler as DeliveryHandler).verify;
      if (verify !== undefined && typeof verify !== 'function') return `verify() a function where given (${JSON.stringify(type)})`;
    }
    return undefined;
  })();
  if (problem) throw new TypeError(`the deliveries module must export \`deliveries\`: ${problem}`);
  return deliveries as Readonly<Record<string, DeliveryHandler>>;
}

/**
 * The outbox consumer of an endpoint whose tools queue these event types: the module's handlers deliver them. A
 * module of its own, like the reconciler's factory: the MCP function's (./endpoint.ts) would bundle the MCP SDK here.
 * `module` is the deliveries module as loaded (`export const deliveries = { 'invoice.send': { deliver, verify } }`,
 * or a default export); one that is not an object of handlers with `deliver()` fails the cold start with the reason.
 * @public
 */
export function consumerLambdaHandler(module: { deliveries?: unknown; default?: unknown }) {
  const services = createWorkerServices(loadWorkerConfig());
  return withMetrics(createConsumerHandler(createConsumer(services, { deliveries: deliveriesOf(module) }), services.logger));
}
