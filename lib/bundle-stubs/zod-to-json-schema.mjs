// Stands in for `zod-to-json-schema` in the Lambda bundles; see ./zod-v3.mjs. The MCP SDK converts Zod 3 schemas
// with it and Zod 4 schemas with Zod's own `toJSONSchema`.
export function zodToJsonSchema() {
  throw new Error('zod-to-json-schema is not bundled in this Lambda (lib/bundling.ts aliases it to a stub): define schemas with zod 4');
}
export default zodToJsonSchema;
