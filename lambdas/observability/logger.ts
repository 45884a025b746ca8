import { Logger } from '@aws-lambda-powertools/logger';
import { EnvVars } from '../config';
import { read } from '../env-var';

/**
 * The one logger of the Lambda functions (Powertools: structured JSON on stdout, which Lambda sends to CloudWatch;
 * level from POWERTOOLS_LOG_LEVEL). Log identities as `hashForLog(key)`, never raw keys, arguments or personal data.
 */
export const logger = new Logger({ serviceName: read(process.env, EnvVars.powertoolsServiceName) });

/**
 * What the toolkit logs through outside Lambda: a message and its fields. Powertools' `Logger`, `console` and most
 * structured loggers fit as they are.
 */
export interface ToolkitLogger {
  // `any[]`: each logger types its extra arguments its own way (Powertools: attributes or an error; console: anything).
  debug(message: string, ...fields: any[]): void;
  info(message: string, ...fields: any[]): void;
  warn(message: string, ...fields: any[]): void;
  error(message: string, ...fields: any[]): void;
}

type LogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR' | 'SILENT';
const LEVELS: readonly LogLevel[] = ['DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT'];

export interface StderrLoggerOptions {
  /** The `service` of every line. Default POWERTOOLS_SERVICE_NAME, else `idempotent-mcp`. */
  serviceName?: string;
  /** Lines below it are dropped. Default POWERTOOLS_LOG_LEVEL, else INFO. */
  level?: LogLevel;
  /** Where each JSON line goes. Default standard error. */
  write?: (line: string) => void;
}

/**
 * A logger for a server of your own: one JSON line per entry (level, message, service, timestamp, fields) on
 * standard error, never on standard output, which a stdio MCP server speaks its protocol on.
 */
export function stderrLogger(options: StderrLoggerOptions = {}): ToolkitLogger {
  const service = options.serviceName ?? read(process.env, EnvVars.powertoolsServiceName);
  const threshold = LEVELS.indexOf(options.level ?? read(process.env, EnvVars.powertoolsLogLevel));
  const write = options.write ?? ((line: string) => void process.stderr.write(`${line}\n`));
  const at = (level: LogLevel) => (message: string, fields?: Record<string, unknown>) => {
    if (LEVELS.indexOf(level) < threshold) return;
    write(JSON.stringify({ level, message, service, timestamp: new Date().toISOString(), ...fields }));
  };
  return { debug: at('DEBUG'), info: at('INFO'), warn: at('WARN'), error: at('ERROR') };
}
