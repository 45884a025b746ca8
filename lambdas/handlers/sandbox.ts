import { Hono } from 'hono';
import { handle } from 'hono/aws-lambda';
import { loadConfig } from '../config';
import { createServices } from '../runtime/services';
import { createSandboxRouter } from '../sandbox/router';

const config = loadConfig();
if (!config.sandboxEnabled) throw new Error('the sandbox function is deployed only with SANDBOX_ENABLED=true');
const services = createServices(config);

/**
 * The sandbox downstreams (payments, tickets, mailbox, faults, ledger) as their own function, for a deployed demo
 * behind the stack's sandbox flag (off by default). Same routes as locally, under /sandbox.
 */
const app = new Hono().route('/sandbox', createSandboxRouter(services));
export const handler = handle(app);
