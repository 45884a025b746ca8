import { Logger } from '@aws-lambda-powertools/logger';
import { EnvVars, read } from '../config';

/**
 * The one logger (Powertools: structured JSON, level from POWERTOOLS_LOG_LEVEL).
 * Log identities as `hashForLog(key)`, never raw keys, arguments or personal data.
 */
export const logger = new Logger({ serviceName: read(process.env, EnvVars.powertoolsServiceName) });
