// Stands in for `@smithy/core/event-streams` in the Lambda bundles. The SDK's protocols import it (dynamically) only
// to send or read an event stream; no DynamoDB, SQS or SES operation these functions call has one.
const unused = () => {
  throw new Error('@smithy/core/event-streams is not bundled in this Lambda (lib/bundling.ts aliases it to a stub): no operation called here streams events');
};
export const EventStreamSerde = unused;
export const eventStreamSerdeProvider = unused;
