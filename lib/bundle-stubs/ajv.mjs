// Stands in for `ajv` and `ajv-formats` in the Lambda bundles (see LambdaBundle.alias in lib/bundling.ts). The MCP
// SDK imports them statically but only constructs Ajv when a Server gets no validator, and lambdas/mcp/server.ts
// always passes one. Failing loudly here beats bundling ~130 KiB that no request runs.
const unavailable = () => {
  throw new Error('ajv is not bundled in this Lambda (lib/bundling.ts aliases it to a stub): pass a jsonSchemaValidator');
};

export default class Ajv {
  constructor() {
    unavailable();
  }
}
export { Ajv };
