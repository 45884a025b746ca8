import { reconcilerLambdaHandler } from 'idempotent-mcp/lambda';
import { tools } from '../tools';
import { withReferenceClients } from '../tools/services';

/**
 * EventBridge schedule (every minute): settles UNKNOWN and stale records of the demo tools, re-sends stuck outbox
 * events. request_payment's reconcile hook asks the payments provider, so its client is added to the services.
 */
export const handler = reconcilerLambdaHandler({ tools, withClients: withReferenceClients });
