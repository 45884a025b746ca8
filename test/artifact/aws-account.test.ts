import { randomUUID } from 'node:crypto';
import { CreateTableCommand, DynamoDBClient, GetItemCommand, PutItemCommand, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LocalAwsAccount, type Identity } from './aws-account';
import { ACCOUNT, REGION } from './template';

/**
 * The account's IAM check itself: a call outside the role is refused as AWS refuses it, named by action and
 * resource, and a transaction is authorized item by item.
 */
describe("the local account checks every call against the caller's role", () => {
  const table = `iam-check-${randomUUID()}`;
  const tableArn = `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${table}`;
  let account: LocalAwsAccount;
  let identity: Identity;
  let client: DynamoDBClient;

  beforeAll(async () => {
    const endpoint = inject('dynamodbEndpoint');
    const admin = new DynamoDBClient({ endpoint, region: REGION, credentials: { accessKeyId: 'admin', secretAccessKey: 'admin' } });
    await admin.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      }),
    );
    admin.destroy();
    account = new LocalAwsAccount({ dynamodb: endpoint, sqs: 'http://127.0.0.1:9' });
    await account.start();
    const policy = {
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Action: ['dynamodb:GetItem', 'dynamodb:PutItem'], Resource: tableArn }],
    };
    identity = account.addIdentity('fn', `arn:aws:iam::${ACCOUNT}:role/fn-role`, [{ name: 'p', policy }]);
    client = new DynamoDBClient({ endpoint: account.endpoint, region: REGION, maxAttempts: 1, credentials: account.credentialsOf('fn') });
  });
  afterAll(async () => {
    client?.destroy();
    await account?.stop();
  });

  it('forwards a granted call and records it as allowed', async () => {
    await client.send(new PutItemCommand({ TableName: table, Item: { pk: { S: 'a' } } }));
    expect((await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'a' } } }))).Item).toEqual({ pk: { S: 'a' } });
    expect(account.calls.map((c) => [c.action, c.resource, c.decision])).toEqual([
      ['dynamodb:PutItem', tableArn, 'Allowed'],
      ['dynamodb:GetItem', tableArn, 'Allowed'],
    ]);
  });

  it("refuses a transaction one of whose items the role does not allow, naming that item's action, and writes nothing", async () => {
    const refused = await client
      .send(
        new TransactWriteItemsCommand({
          TransactItems: [
            { Put: { TableName: table, Item: { pk: { S: 'b' } } } },
            { ConditionCheck: { TableName: table, Key: { pk: { S: 'a' } }, ConditionExpression: 'attribute_exists(pk)' } },
          ],
        }),
      )
      .then(
        () => undefined,
        (err: Error) => err,
      );
    expect(refused?.name).toBe('AccessDeniedException');
    expect(refused?.message).toContain(`not authorized to perform: dynamodb:ConditionCheckItem on resource: ${tableArn}`);
    expect(account.calls.slice(-2).map((c) => [c.operation, c.action, c.decision])).toEqual([
      ['TransactWriteItems', 'dynamodb:PutItem', 'Allowed'],
      ['TransactWriteItems', 'dynamodb:ConditionCheckItem', 'ImplicitlyDenied'],
    ]);
    expect((await client.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'b' } } }))).Item).toBeUndefined();
  });

  it('refuses a request signed with another secret before anything is evaluated', async () => {
    const forged = new DynamoDBClient({
      endpoint: account.endpoint,
      region: REGION,
      maxAttempts: 1,
      credentials: { ...account.credentialsOf('fn'), secretAccessKey: 'not-the-secret' },
    });
    const refused = await forged.send(new GetItemCommand({ TableName: table, Key: { pk: { S: 'a' } } })).then(
      () => undefined,
      (err: Error) => err,
    );
    forged.destroy();
    expect(refused?.name).toBe('InvalidSignatureException');
    expect(identity.functionId).toBe('fn');
  });
});
