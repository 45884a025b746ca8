import { startDynamoDbLocal } from './local/dynamodb-local';
const d = await startDynamoDbLocal();
console.log(d.endpoint);
process.on('SIGTERM', async () => { await d.stop(); process.exit(0); });
setInterval(() => {}, 1 << 30);
