import { createHash } from 'node:crypto';
import * as z from 'zod';
import { countForTool, MetricName } from 'idempotent-mcp/lambda';
import { defineWriteTool, type WriteToolContext } from 'idempotent-mcp/mcp';
import { formatMinorUnits, minorDigitsOf } from './money';
import { identifier } from './orders';
import type { PaymentServices } from './services';

const paymentSchema = z.object({
  payment_id: z.string(),
  status: z.string().describe("The provider's status, e.g. succeeded."),
  amount_minor: z.number().int(),
  currency: z.string(),
});

export const requestPaymentTool = defineWriteTool({
  name: 'request_payment',
  title: 'Request payment',
  description:
    'Pays money to a payee through the payments provider. This moves money and cannot be undone: the person approves ' +
    "each payment on the endpoint's approval page, signed in; the call answers with the link to show them, and runs " +
    "once they approved it (call again with the same operation_id). amount_minor is in the currency's minor unit " +
    '(ISO 4217: cents for EUR and USD, whole yen for JPY, 1/1000 for BHD). Returns the payment with its payment_id.',
  input: {
    amount_minor: z
      .number()
      .int()
      .positive()
      .max(1_000_000_000)
      .describe('Amount in minor units, e.g. 1250 for 12.50 EUR or for 1,250 JPY.'),
    currency: z
      .string()
      .refine((code) => minorDigitsOf(code) !== undefined, 'must be an ISO 4217 currency code such as EUR, USD or JPY')
      .describe('ISO 4217 currency code.'),
    payee_id: identifier(128).describe('The payee to pay.'),
    memo: z.string().max(200).optional().describe('Shown on the payment.'),
  },
  result: paymentSchema,
  annotations: { destructiveHint: true, openWorldHint: true },
  keySource: 'operation_id',
  // Money leaves and cannot come back: the person approves each payment on the approval page, signed in (MCP says
  // transactions are authorized in URL mode, never in a form the client could answer; docs/confirmation.md).
  confirmation: 'approval',
  // The amount by the currency's own minor units; the memo quoted (JSON's escapes), so it cannot pass for a line of the
  // summary (the toolkit shows the summary with invisible characters made visible).
  summarize: ({ amount_minor, currency, payee_id, memo }) =>
    `Pay ${formatMinorUnits(amount_minor, currency)} to ${payee_id}${memo ? ` (memo: ${JSON.stringify(memo)})` : ''}`,
  // No `reexecuteSafe`: PAYMENTS_URL may name a provider that books every request it receives (the sandbox's
  // late-commit fault is one), so a stale execution is never re-run; the reconciler finds the payment by our key once
  // the request's in-flight window has passed.
  async execute(args, ctx: WriteToolContext<PaymentServices>) {
    const { payments } = ctx.services.downstreams;
    const { payment, replayed } = await payments.create(args, {
      idempotencyKey: ctx.idempotencyKey,
      tenant: ctx.tenant,
      signal: ctx.signal,
    });
    if (replayed) {
      countForTool(MetricName.DownstreamDuplicateRejections, ctx.tool);
      ctx.services.logger.info('payments provider answered a repeated key with the first payment', {
        tool: ctx.tool,
        tenant: ctx.tenant,
        key_hash: createHash('sha256').update(ctx.idempotencyKey).digest('hex').slice(0, 12),
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
