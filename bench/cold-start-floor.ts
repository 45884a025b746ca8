import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { awsClientConfig } from '../lambdas/store/clients';
import { floorHandler } from './cold-start-floor-server';

/**
 * The cold-start floor: a bare MCP write tool as a team writes it, with the AWS SDK's DynamoDB document client.
 * Bundled with the deployed options, it measures how fast the mandated dependencies alone start on this machine.
 */
const doc = DynamoDBDocumentClient.from(new DynamoDBClient({ ...awsClientConfig(process.env.DYNAMODB_ENDPOINT), maxAttempts: 3 }));

export const handler = floorHandler((TableName, Item) => doc.send(new PutCommand({ TableName, Item })));
