import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import type { LocalStack } from './local-stack';
import type { FaultRequest } from '../../reference/sandbox/faults';
import { type AnyMcpClient, callRead } from './mcp';

export interface SandboxLedger {
  orders: Array<Record<string, unknown>>;
  payments: Array<{ payment_id: string; tenant: string; idempotency_key: string; amount_minor: number }>;
  tickets: Array<{ ticket_id: string; tenant: string; event_id?: string; title: string }>;
  emails: Array<{ message_id: string; tenant: string; event_id?: string; to: string; subject: string }>;
}

export async function sandboxLedger(stack: LocalStack): Promise<SandboxLedger> {
  const response = await fetch(`${stack.url}/sandbox/ledger`);
  if (!response.ok) throw new Error(`ledger answered ${response.status}`);
  return (await response.json()) as SandboxLedger;
}

/** Arms a fault through the public sandbox API, as a user would. */
export async function armFault(stack: LocalStack, fault: Partial<FaultRequest> & Pick<FaultRequest, 'target' | 'mode'>): Promise<void> {
  const response = await fetch(`${stack.url}/sandbox/faults`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(fault),
  });
  if (response.status !== 201) throw new Error(`arming ${JSON.stringify(fault)} answered ${response.status}: ${await response.text()}`);
}

export async function clearFaults(stack: LocalStack): Promise<void> {
  await fetch(`${stack.url}/sandbox/faults`, { method: 'DELETE' });
}

export async function armedFaults(stack: LocalStack): Promise<Array<{ target: string; mode: string; remaining: number }>> {
  return (
    (await (await fetch(`${stack.url}/sandbox/faults`)).json()) as { faults: Array<{ target: string; mode: string; remaining: number }> }
  ).faults;
}

/**
 * Polls `probe` until it returns a value (not undefined), at most `timeoutMs`: waits for a background worker to get
 * somewhere, never asserts how fast. Throws with the last value seen, so a failure says what state was reached.
 */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface OperationStatus {
  status: string;
  result?: Record<string, unknown>;
  error?: { code: string; message: string };
  delivery?: {
    event_id: string;
    status: 'pending' | 'delivered' | 'failed';
    result?: Record<string, unknown>;
    error?: { code: string; message: string };
    sends: number;
  };
}

export async function operationStatus(client: Client, tool: string, key: string): Promise<OperationStatus> {
  const { structured, isError, text } = await callRead(client, 'get_operation_status', { tool, idempotency_key: key });
  if (isError || !structured) throw new Error(`get_operation_status failed: ${text}`);
  return structured as unknown as OperationStatus;
}

/** Waits until the queued effect of (tool, key) is no longer pending and returns its delivery. */
export async function settledDelivery(client: Client, tool: string, key: string, timeoutMs?: number) {
  return eventually(
    async () => {
      const { delivery } = await operationStatus(client, tool, key);
      return delivery && delivery.status !== 'pending' ? delivery : undefined;
    },
    `the delivery of ${tool} to settle`,
    timeoutMs,
  );
}

/** A request_payment call's arguments for the confirmation and approval tests: 12.50 EUR to payee-7, memo "rent". */
export const paymentArgs = (operationId: string, overrides: Record<string, unknown> = {}) => ({
  operation_id: operationId,
  amount_minor: 1250,
  currency: 'EUR',
  payee_id: 'payee-7',
  memo: 'rent',
  ...overrides,
});

export async function issueOperationId(client: AnyMcpClient, tool: string): Promise<string> {
  const { structured, isError, text } = await callRead(client, 'issue_operation_id', { tool });
  if (isError || !structured) throw new Error(`issue_operation_id failed: ${text}`);
  return structured.operation_id as string;
}

/** Event ids of the messages now visible on a queue (they become visible again after the given timeout). */
export async function peekQueue(stack: LocalStack, queueUrl: string, visibilitySeconds = 0): Promise<string[]> {
  const { Messages } = await stack.workers.sqs.send(
    new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: visibilitySeconds }),
  );
  return (Messages ?? []).map((m) => (JSON.parse(m.Body ?? '{}') as { event_id: string }).event_id);
}

/** An SQS batch as the event source mapping delivers it (the consumer handler is the Lambda's). */
export function sqsEvent(bodies: string[], receiveCount = 1): SQSEvent {
  return {
    Records: bodies.map((body, index) => ({
      messageId: `m-${index}-${Math.random()}`,
      receiptHandle: `fake-${index}`,
      body,
      attributes: {
        ApproximateReceiveCount: String(receiveCount),
        SentTimestamp: '0',
        SenderId: 'test',
        ApproximateFirstReceiveTimestamp: '0',
      },
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:local:000000000000:outbox',
      awsRegion: 'local',
    })),
  };
}
