/** What the reference endpoint's outbox tools tell an agent about their answer (a queued effect, delivered later). */
export const QUEUED_NOTE =
  'The effect is queued in the same transaction that records this call and delivered exactly once shortly after; ' +
  'the result says queued with an event_id, and get_operation_status shows the delivery (pending, delivered, failed).';
