/**
 * The stack outputs IdempotentMcpEndpoint adds (its `outputs` prop), by name: docs/deploy.md's recipes and
 * `idempotent-mcp ops --stack` (table and queues) read them; `FunctionRuntime` is the Lambda runtime every function
 * of the endpoint runs on (`nodejs22.x`, whatever Node runs `cdk deploy`), printed by the deploy. Plain data, so the ops CLI reads it without the CDK.
 */
export const StackOutput = {
  mcpUrl: 'McpUrl',
  tokenEndpoint: 'TokenEndpoint',
  tokenScope: 'TokenScope',
  userPoolId: 'UserPoolId',
  clientId: 'ClientId',
  clientSecretCommand: 'ClientSecretCommand',
  approvalPageUrl: 'ApprovalPageUrl',
  approvalCallbackUrl: 'ApprovalCallbackUrl',
  approvalClientId: 'ApprovalClientId',
  table: 'TableName',
  /** A gateway's: whose records are its upstream's on the table (TABLE_KEY_PREFIX), for `idempotent-mcp ops --key-prefix`. */
  tableKeyPrefix: 'TableKeyPrefix',
  queue: 'OutboxQueueUrl',
  deadLetterQueue: 'DeadLetterQueueUrl',
  dashboard: 'DashboardName',
  runtime: 'FunctionRuntime',
} as const;
