import * as z from 'zod';
import { hashForLog } from 'idempotent-mcp/engine';
import { countForTool, MetricName } from 'idempotent-mcp/lambda';
import { defineWriteTool, type WriteToolContext } from 'idempotent-mcp/mcp';
import { identifier } from './orders';
import type { PaymentServices } from './services';

const paymentSchema = z.object({
  payment_id: z.string(),
  status: z.string().describe('The provider\'s status, e.g. succeeded.'),
  amount_minor: z.number().int(),
  currency: z.string(),
});

export const requestPaymentTool = defineWriteTool({
  name: 'request_payment',
  title: 'Request payment',
  description:
    'Pays money to a payee through the payments provider. This moves money and cannot be undone: before calling, ' +
    'show the user this summary and get their confirmation: "Pay <amount_minor / 100> <currency> to <payee_id> ' +
    '(memo: <memo>)". amount_minor is in the currency\'s minor unit (cents for EUR and USD). Returns the payment ' +
    'with its payment_id.',
  input: {
    amount_minor: z.number().int().positive().max(1_000_000_000).describe('Amount in minor units, e.g. 1250 for 12.50 EUR.'),
    currency: z.string().regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as EUR').describe('ISO 4217 currency code.'),
    payee_id: identifier(128).describe('The payee to pay.'),
    memo: z.string().max(200).optional().describe('Shown on the payment.'),
  },
  result: paymentSchema,
  annotations: { destructiveHint: true, openWorldHint: true },
  keySource: 'operation_id',
  // Money leaves and cannot come back: the person says yes to each payment (see lambdas/mcp/confirmation.ts).
  confirmation: 'required',
  summarize: ({ amount_minor, currency, payee_id, memo }) =>
    `Pay ${(amount_minor / 100).toFixed(2)} ${currency} to ${payee_id}${memo ? ` (memo: ${memo})` : ''}`,
  // The provider deduplicates on our key, so a stale execution may be re-run: it gets the first payment back.
  idempotency: { reexecuteSafe: true },
  async execute(args, ctx: WriteToolContext<PaymentServices>) {
    const { payments } = ctx.services.downstreams;
    const { payment, replayed } = await payments.create(args, { idempotencyKey: ctx.idempotencyKey, tenant: ctx.tenant, signal: ctx.signal });
    if (replayed) {
      countForTool(MetricName.DownstreamDuplicateRejections, ctx.tool);
      ctx.services.logger.info('payments provider answered a repeated key with the first payment', {
        tool: ctx.tool,
        tenant: ctx.tenant,
        key_hash: hashForLog(ctx.idempotencyKey),
      });
    }
    return { result: payment };
  },
  async reconcile({ record, signal }, services) {
    const payment = await services.downstreams.payments.findByKey(record.idempotencyKey, { signal });
    return payment ? { kind: 'found', result: payment } : { kind: 'absent' };
  },
  // No payment under our key: nothing was paid, so the same operation id may run it.
  onAbsent: 'release',
});
