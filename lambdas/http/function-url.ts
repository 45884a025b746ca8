import { handle } from 'hono/aws-lambda';
import { withMetrics } from '../observability/metrics';
import type { ToolRuntime } from '../mcp/tool-types';
import { createApp, type AppOptions, type AppServices } from './app';

/**
 * The app as a Lambda handler for Function URL events (payload 2.0). hono/aws-lambda converts the event to a web
 * Request and hands the Lambda context on as `c.env.lambdaContext`, whose remaining time bounds each execution.
 */
export function createLambdaHandler<S extends ToolRuntime>(services: AppServices<S>, options: AppOptions<S>) {
  return withMetrics(handle(createApp(services, options)));
}
