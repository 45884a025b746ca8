// Stands in for `@modelcontextprotocol/server/_shims` in the Lambda bundles (see LambdaBundle.alias in
// lib/bundling.ts). SDK v2 inlines Ajv in the Node build of this entry, as the default JSON Schema validator of a
// Server given none; lambdas/mcp/server.ts always passes one, so nothing constructs it. Failing loudly here beats
// bundling ~150 KiB that no request runs. `process` serves only the stdio transport, which no function uses.
export class DefaultJsonSchemaValidator {
  constructor() {
    throw new Error(
      'the MCP SDK default JSON Schema validator (Ajv) is not bundled in this Lambda (lib/bundling.ts stubs it): pass a jsonSchemaValidator',
    );
  }
}
export { default as process } from 'node:process';
