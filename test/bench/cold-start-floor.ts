import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { createDynamoDbClient } from '../../lambdas/store/clients';
import { floorHandler } from './cold-start-floor-server';

/**
 * The cold-start floor: a bare MCP write tool as a team writes it, with the AWS SDK's DynamoDB document client made
 * exactly as the endpoint makes it (createDynamoDbClient), so the ratio compares the endpoint, not the client.
 * Bundled with the deployed options, it measures how fast the mandated dependencies alone start on this machine.
 */
const doc = createDynamoDbClient();

export const handler = floorHandler((TableName, Item) => doc.send(new PutCommand({ TableName, Item })));
