import { TransientToolError, UncertainToolError } from 'idempotent-mcp/engine';
import { baseUrlOf, DownstreamErrorCode, failureForStatus, LookupFailedError, lookupJson, requestJson, type CallOptions } from './http';

export interface PaymentRequest {
  amount_minor: number;
  currency: string;
  payee_id: string;
  memo?: string;
}

export interface Payment {
  payment_id: string;
  status: string;
  amount_minor: number;
  currency: string;
}

export interface PaymentAttempt {
  payment: Payment;
  /** The provider had already processed this key and answered with the first payment (our key saved a duplicate). */
  replayed: boolean;
}

const SERVICE = 'the payments provider';

function toPayment(body: unknown): Payment {
  const p = body as Partial<Payment> | undefined;
  if (!p || typeof p.payment_id !== 'string' || typeof p.amount_minor !== 'number' || typeof p.currency !== 'string') {
    // A 2xx we cannot read: the payment probably exists, so this must be verified rather than retried.
    throw new UncertainToolError(DownstreamErrorCode.ERROR, `${SERVICE} answered with an unreadable payment`);
  }
  return { payment_id: p.payment_id, status: String(p.status ?? 'succeeded'), amount_minor: p.amount_minor, currency: p.currency };
}

/**
 * A payments provider that deduplicates on the `Idempotency-Key` header (Stripe-style) and answers
 * "what happened to key K" (`GET /v1/payments?idempotency_key=K`).
 */
export class PaymentsClient {
  constructor(private readonly options: { baseUrl: string | undefined; timeoutMs: number }) {}

  async create(request: PaymentRequest, call: CallOptions & { idempotencyKey: string; tenant: string }): Promise<PaymentAttempt> {
    const result = await requestJson(
      SERVICE,
      `${baseUrlOf(SERVICE, this.options.baseUrl)}/v1/payments`,
      {
        method: 'POST',
        headers: { 'idempotency-key': call.idempotencyKey },
        body: { ...request, metadata: { tenant: call.tenant } },
      },
      { signal: call.signal, timeoutMs: this.options.timeoutMs },
    );
    if (result.status === 200 || result.status === 201) {
      return { payment: toPayment(result.body), replayed: result.headers.get('idempotent-replayed') === 'true' };
    }
    // Another request with this key is being processed right now: nothing new happened, ask again shortly.
    if (result.status === 409) {
      throw new TransientToolError(DownstreamErrorCode.UNAVAILABLE, `${SERVICE} is still processing this key`, 1000);
    }
    throw failureForStatus(SERVICE, result);
  }

  /** The payment made with our key, or undefined when the provider confirms it has none. Throws LookupFailedError. */
  async findByKey(idempotencyKey: string, call: CallOptions): Promise<Payment | undefined> {
    const url = `${baseUrlOf(SERVICE, this.options.baseUrl)}/v1/payments?idempotency_key=${encodeURIComponent(idempotencyKey)}`;
    const result = await lookupJson(SERVICE, url, { signal: call.signal, timeoutMs: this.options.timeoutMs });
    if (result.status === 404) return undefined;
    if (result.status !== 200) throw new LookupFailedError(SERVICE, `HTTP ${result.status}`);
    try {
      return toPayment(result.body);
    } catch {
      throw new LookupFailedError(SERVICE, 'unreadable answer');
    }
  }
}
