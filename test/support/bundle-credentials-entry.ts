import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';

// Built with the Lambda bundle options by test/cdk/bundle.test.ts: prints the credentials each client resolves.
const clients = { dynamodb: new DynamoDBClient({ region: 'us-east-1' }), sqs: new SQSClient({ region: 'us-east-1' }) };
const resolved: Record<string, string> = {};
for (const [name, client] of Object.entries(clients)) {
  try {
    resolved[name] = (await client.config.credentials()).accessKeyId;
  } catch (err) {
    resolved[name] = `error: ${(err as Error).name}`;
  }
}
process.stdout.write(JSON.stringify(resolved));
