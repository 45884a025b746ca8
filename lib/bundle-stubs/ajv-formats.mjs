// Stands in for `ajv-formats` in the Lambda bundles; see ./ajv.mjs.
export default function addFormats() {
  throw new Error('ajv-formats is not bundled in this Lambda (lib/bundling.ts aliases it to a stub): pass a jsonSchemaValidator');
}
