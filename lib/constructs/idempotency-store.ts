import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as kms from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import { TableSchema } from '../../lambdas/store/table-schema';

/**
 * Props of `IdempotencyTable`: an existing table, or the new one's encryption, removal policy, recovery, protection and stream.
 */
export interface IdempotencyTableProps {
  /**
   * Use a table you already have instead of creating one. It must have the toolkit's schema (`ensureTable`'s): partition key
   * `pk` (string) and sort key `sk` (string); TTL on `expires_at`; a global secondary index `attention` with
   * partition key `attention_pk` (string), sort key `attention_at` (number) and ALL attributes projected; and, for an
   * endpoint with an outbox (deliveries), a stream with NEW_IMAGE, its ARN given as `tableStreamArn` of
   * `Table.fromTableAttributes` (with `encryptionKey` there too if it has a customer managed key). The other props
   * then do not apply: your stack owns the table.
   * @default a new table with that schema
   */
  readonly existingTable?: dynamodb.ITable;
  /**
   * Customer managed KMS key for the table (and its stream).
   * @default the AWS managed key (no key cost)
   */
  readonly encryptionKey?: kms.IKey;
  /**
   * `cdk destroy` keeps records, orders and outbox events (a duplicate after a redeploy must still replay).
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Restores to any second of the last 35 days.
   * @default true
   */
  readonly pointInTimeRecovery?: boolean;
  /**
   * Refuse DeleteTable even from CloudFormation.
   * @default false (RETAIN already survives `cdk destroy`)
   */
  readonly deletionProtection?: boolean;
  /**
   * The table's stream (NEW_IMAGE), which the outbox relay reads.
   * @default true
   */
  readonly stream?: boolean;
}

/**
 * The item-level actions a function may be granted; Scan is deliberately not among them.
 */
export type TableItemAction = 'GetItem' | 'PutItem' | 'UpdateItem' | 'DeleteItem' | 'ConditionCheckItem';

// What DynamoDB asks KMS for on the caller's behalf; spelled out because wildcards like GenerateDataKey* grant more.
const KMS_READ = ['kms:Decrypt', 'kms:DescribeKey'];
const KMS_WRITE = [
  ...KMS_READ,
  'kms:Encrypt',
  'kms:GenerateDataKey',
  'kms:GenerateDataKeyWithoutPlaintext',
  'kms:ReEncryptFrom',
  'kms:ReEncryptTo',
];

/**
 * The one table (records, business items, outbox events), defined from the same schema the local setup
 * (`ensureTable`) uses. Grants are exact action lists on exact ARNs: no `dynamodb:*`, no Scan, the index only for Query.
 */
export class IdempotencyTable extends Construct {
  readonly table: dynamodb.ITable;
  readonly encryptionKey?: kms.IKey;

  constructor(scope: Construct, id: string, props: IdempotencyTableProps = {}) {
    super(scope, id);
    if (props.existingTable) {
      const ignored = (['encryptionKey', 'removalPolicy', 'pointInTimeRecovery', 'deletionProtection'] as const).filter(
        (p) => props[p] !== undefined,
      );
      if (ignored.length)
        throw new Error(`IdempotencyTable: ${ignored.join(', ')} cannot be set with existingTable (your stack owns that table)`);
      this.table = props.existingTable;
      this.encryptionKey = props.existingTable.encryptionKey;
      return;
    }
    const { partitionKey, sortKey, ttlAttribute, attentionIndex } = TableSchema;
    this.encryptionKey = props.encryptionKey;
    const table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: sortKey, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: ttlAttribute,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: props.pointInTimeRecovery ?? true },
      ...(props.encryptionKey
        ? { encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED, encryptionKey: props.encryptionKey }
        : { encryption: dynamodb.TableEncryption.AWS_MANAGED }),
      // The relay reads committed outbox events from the stream; only the new image is needed.
      stream: props.stream === false ? undefined : dynamodb.StreamViewType.NEW_IMAGE,
      removalPolicy: props.removalPolicy ?? RemovalPolicy.RETAIN,
      deletionProtection: props.deletionProtection ?? false,
    });
    // Sparse: only items needing attention carry attention_pk (epoch ms in attention_at), as table-schema.ts writes them.
    table.addGlobalSecondaryIndex({
      indexName: attentionIndex.name,
      partitionKey: { name: attentionIndex.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: attentionIndex.sortKey, type: dynamodb.AttributeType.NUMBER },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    this.table = table;
  }

  /** The item actions of `grantItems` with Query on the attention index: reading records (an ops role's list and show). */
  grantReadRecords(grantee: iam.IGrantable): iam.Grant {
    return this.grantItems(grantee, ['GetItem']).combine(this.grantAttentionQuery(grantee));
  }

  get tableName(): string {
    return this.table.tableName;
  }

  get attentionIndexArn(): string {
    return `${this.table.tableArn}/index/${TableSchema.attentionIndex.name}`;
  }

  /** Exactly these item actions on the table itself (not its indexes). */
  grantItems(grantee: iam.IGrantable, actions: TableItemAction[]): iam.Grant {
    const grant = iam.Grant.addToPrincipal({
      grantee,
      actions: [...new Set(actions)].map((a) => `dynamodb:${a}`),
      resourceArns: [this.table.tableArn],
    });
    const writes = actions.some((a) => a !== 'GetItem' && a !== 'ConditionCheckItem');
    this.encryptionKey?.grant(grantee, ...(writes ? KMS_WRITE : KMS_READ));
    return grant;
  }

  /** Query on the sparse attention index only (the reconciler's work list; never a table scan). */
  grantAttentionQuery(grantee: iam.IGrantable): iam.Grant {
    const grant = iam.Grant.addToPrincipal({ grantee, actions: ['dynamodb:Query'], resourceArns: [this.attentionIndexArn] });
    this.encryptionKey?.grant(grantee, ...KMS_READ);
    return grant;
  }
}
