import { Logger } from '@aws-lambda-powertools/logger';

/**
 * The one logger (Powertools: structured JSON, level from POWERTOOLS_LOG_LEVEL).
 * Log identities as `hashForLog(key)`, never raw keys, arguments or personal data.
 */
export const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'idempotent-mcp' });
