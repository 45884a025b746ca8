import {
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  DynamoDBServiceException,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
  UpdateTimeToLiveCommand,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { DynamoDbServiceError, type DynamoDbOperation, type DynamoDbTransport, type WireBody } from './dynamodb-transport';

const COMMANDS = {
  GetItem: GetItemCommand,
  PutItem: PutItemCommand,
  UpdateItem: UpdateItemCommand,
  DeleteItem: DeleteItemCommand,
  TransactWriteItems: TransactWriteItemsCommand,
  Query: QueryCommand,
  Scan: ScanCommand,
  CreateTable: CreateTableCommand,
  DeleteTable: DeleteTableCommand,
  DescribeTable: DescribeTableCommand,
  UpdateTimeToLive: UpdateTimeToLiveCommand,
} satisfies Record<DynamoDbOperation, unknown>;

type AnyCommand = new (input: WireBody) => Parameters<DynamoDBClient['send']>[0];

/**
 * The transport over a DynamoDB client of the AWS SDK that you configure (credentials chain, retry strategy,
 * instrumentation such as X-Ray). The functions of this package ship the lean HttpTransport instead; the stores
 * behave the same on both (test/integration/dynamodb-transports.test.ts).
 */
export class AwsSdkTransport implements DynamoDbTransport {
  constructor(readonly client: DynamoDBClient) {}

  async call(operation: DynamoDbOperation, input: WireBody): Promise<WireBody> {
    const Command = COMMANDS[operation] as unknown as AnyCommand;
    try {
      const { $metadata: _metadata, ...output } = (await this.client.send(new Command(input))) as WireBody & { $metadata: unknown };
      return output;
    } catch (err) {
      if (!(err instanceof DynamoDBServiceException)) throw err;
      const { $metadata, $fault: _fault, $response: _response, $retryable: _retryable, ...fields } = err as DynamoDBServiceException & WireBody;
      throw new DynamoDbServiceError(err.name, err.message, { ...fields, message: err.message }, $metadata?.httpStatusCode);
    }
  }

  destroy(): void {
    this.client.destroy();
  }
}
