// Stands in for `zod/v3` in the Lambda bundles (see LambdaBundle.alias in lib/bundling.ts). The MCP SDK's
// zod-compat imports it statically to build objects from Zod 3 shapes; every schema in this project is Zod 4,
// so no request reaches it. Failing loudly beats bundling ~55 KiB of a second Zod.
const unavailable = () => {
  throw new Error('zod/v3 is not bundled in this Lambda (lib/bundling.ts aliases it to a stub): define schemas with zod 4');
};
export const object = unavailable;
export const z = { object };
export default z;
