import { tools } from '../mcp/tools';
import { reconcilerLambdaHandler } from './reconciler-endpoint';

/** EventBridge schedule (every minute): settles UNKNOWN and stale records of the demo tools, re-sends stuck outbox events. */
export const handler = reconcilerLambdaHandler({ tools });
