import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SESv2Client } from '@aws-sdk/client-sesv2';
import { SQSClient } from '@aws-sdk/client-sqs';

// Built with the Lambda bundle options by test/cdk/bundle.test.ts: prints the credentials each client resolves.
// Every client a function builds: DynamoDB (all), SQS (relay), SES (consumer).
const region = 'us-east-1';
const clients = {
  dynamodb: new DynamoDBClient({ region }),
  sqs: new SQSClient({ region }),
  sesv2: new SESv2Client({ region }),
};
const resolved: Record<string, string> = {};
for (const [name, client] of Object.entries(clients)) {
  try {
    resolved[name] = (await client.config.credentials()).accessKeyId;
  } catch (err) {
    resolved[name] = `error: ${(err as Error).name}`;
  }
}
process.stdout.write(JSON.stringify(resolved));
