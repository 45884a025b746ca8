import { unmarshall } from '@aws-sdk/util-dynamodb';
import { StoreUnavailableError } from '../core/errors';

/** An item, a key or expression values with plain JavaScript values (what the document client reads and writes). */
export type Item = Record<string, unknown>;

/**
 * DynamoDB's refusals, read from the AWS SDK's errors by name (not `instanceof`: a client passed in may come from
 * another copy of the SDK). lib-dynamodb unmarshalls answers but not errors, so the items they carry are
 * unmarshalled here.
 */
type AttributeMap = Parameters<typeof unmarshall>[0];
const nameOf = (err: unknown) => (err as { name?: unknown } | null)?.name;
const item = (value: unknown): Item | undefined => (value ? unmarshall(value as AttributeMap) : undefined);

/**
 * A conditional write was refused: an answer, never retried by the SDK.
 */
export const isConditionRefusal = (err: unknown): boolean => nameOf(err) === 'ConditionalCheckFailedException';

/** The item that refused a conditional write that asked for it (`ReturnValuesOnConditionCheckFailure: 'ALL_OLD'`). */
export const refusingItem = (err: unknown): Item | undefined =>
  isConditionRefusal(err) ? item((err as { Item?: unknown }).Item) : undefined;

/** One reason per action of a cancelled transaction, in order: `None`, `ConditionalCheckFailed`, `TransactionConflict`, ... */
export interface CancellationReason {
  Code?: string;
  Message?: string;
  /** The action's item, when its condition failed and it asked for ALL_OLD. */
  Item?: Item;
}

/** The reasons of a cancelled transaction, their items unmarshalled; undefined for any other error. */
export function cancellationReasons(err: unknown): CancellationReason[] | undefined {
  if (nameOf(err) !== 'TransactionCanceledException') return undefined;
  const reasons = (err as { CancellationReasons?: Array<{ Code?: string; Message?: string; Item?: unknown }> }).CancellationReasons ?? [];
  return reasons.map((reason) => ({ Code: reason.Code, Message: reason.Message, Item: item(reason.Item) }));
}

/** The table already exists (a `CreateTable` that found it). */
export const isTableInUse = (err: unknown): boolean => nameOf(err) === 'ResourceInUseException';

/** How many attempts the SDK made for a request (its answer's or its error's `$metadata`); 1 when unknown. */
export const attemptsOf = (answerOrError: unknown): number =>
  Number((answerOrError as { $metadata?: { attempts?: number } } | null)?.$metadata?.attempts ?? 1);

/** Errors that prove DynamoDB refused the request, so it was not applied. Anything else may have been. */
function isDefiniteRejection(err: unknown): boolean {
  const name = (err as { name?: string })?.name ?? '';
  return /ValidationException|ResourceNotFoundException|AccessDenied|ItemCollectionSizeLimitExceeded/.test(name);
}

/** A failed request as the store reports it: a definite refusal as it is, anything else as `StoreUnavailableError`. */
export function unavailable(action: string, err: unknown): Error {
  if (isDefiniteRejection(err)) return err as Error;
  return new StoreUnavailableError(`DynamoDB ${action} failed: ${(err as Error)?.name ?? 'error'}`, { cause: err });
}
