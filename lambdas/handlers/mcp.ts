import * as z from 'zod';
import { loadConfig } from '../config';
import { createLambdaHandler } from '../http/lambda';
import { createServices } from '../runtime/services';

// Zod compiles a fast path (new Function) for each schema on its first parse: on Lambda the cold request pays for
// it and small requests barely win it back. Interpreted parsing is the cheaper trade here (see bench/cold-start.ts).
z.config({ jitless: true });

// Once per container, outside the handler: clients, the JWKS cache and the app serve every invocation. The
// operation-id key is not read here: the first call that needs one reads it (lambdas/runtime/operation-id-secret.ts).
export const handler = createLambdaHandler(createServices(loadConfig()));
