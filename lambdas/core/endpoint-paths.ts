/**
 * The paths the endpoint serves: the CDK code routes them to the function (and registers the approval page's
 * callback with its sign-in client), the runtime serves them and writes the links. One module both import, with no
 * runtime behind it.
 */

/**
 * The MCP endpoint.
 */
export const MCP_PATH = '/mcp';
/** The path of the approval page; the link is `<base>/approvals/<approval id>`. */
export const APPROVALS_PATH = '/approvals';
/** Where the issuer sends the person back after sign-in: the redirect URI registered with the page's client. */
export const APPROVAL_CALLBACK_PATH = `${APPROVALS_PATH}/callback`;
