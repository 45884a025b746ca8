import { handle } from 'hono/aws-lambda';
import { withMetrics } from '../observability/metrics';
import type { Services } from '../runtime/services';
import { createApp, type AppOptions } from './app';

/**
 * The app as a Lambda handler for Function URL events (payload 2.0). hono/aws-lambda converts the event to a web
 * Request and hands the Lambda context on as `c.env.lambdaContext`, whose remaining time bounds each execution.
 */
export function createLambdaHandler(services: Services, options: AppOptions) {
  return withMetrics(handle(createApp(services, options)));
}
