import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { createDynamoDbClient } from '../lambdas/store/clients';
import { floorHandler } from './cold-start-floor-server';

/**
 * The cold-start floor on the package's own DynamoDB client (the lean transport the deployed function uses): the
 * same bare MCP write tool, so that what the endpoint adds beyond its own dependencies shows on its own.
 */
const doc = createDynamoDbClient();

export const handler = floorHandler((TableName, Item) => doc.send(new PutCommand({ TableName, Item })));
