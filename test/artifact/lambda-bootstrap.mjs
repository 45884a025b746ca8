// The Lambda Node.js runtime's part, for one function in a child process: it imports the handler module named by
// the handler string from the code directory, then runs each invocation it is sent with a context whose remaining
// time counts down to the deadline. ARTIFACT_CLOCK_OFFSET_MS moves the function's clock forward (time passing).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [codeDir, handlerString] = process.argv.slice(2);
const dot = handlerString.lastIndexOf('.');
const [moduleName, exportName] = [handlerString.slice(0, dot), handlerString.slice(dot + 1)];
// Set at start too: a cold start's init (a tools module's top-level await) runs on the moved clock as well.
let offsetMs = Number(process.env.ARTIFACT_CLOCK_OFFSET_MS ?? 0);
const realNow = Date.now.bind(Date);
Date.now = () => realNow() + offsetMs;

const file = ['.mjs', '.js', '.cjs'].map((ext) => join(codeDir, moduleName + ext)).find((f) => existsSync(f));
if (!file) {
  process.send({ type: 'init-error', error: `Runtime.ImportModuleError: no ${moduleName}.mjs/.js/.cjs in ${codeDir}` });
  process.exit(1);
}
let handler;
try {
  handler = (await import(pathToFileURL(file).href))[exportName];
  if (typeof handler !== 'function') throw new Error(`Runtime.HandlerNotFound: ${handlerString} is not a function`);
} catch (err) {
  process.send({ type: 'init-error', error: String(err?.stack ?? err) });
  process.exit(1);
}
process.send({ type: 'ready', node: process.version });

process.on('message', async ({ id, event, deadline, clockOffsetMs, requestId }) => {
  offsetMs = clockOffsetMs;
  const context = {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: '$LATEST',
    invokedFunctionArn: process.env.ARTIFACT_FUNCTION_ARN,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
    awsRequestId: requestId,
    logGroupName: process.env.AWS_LAMBDA_LOG_GROUP_NAME,
    logStreamName: process.env.AWS_LAMBDA_LOG_STREAM_NAME,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - realNow()),
  };
  try {
    const result = await handler(event, context);
    process.send({ type: 'result', id, result: result === undefined ? null : result });
  } catch (err) {
    process.send({ type: 'error', id, error: { errorType: err?.name ?? 'Error', errorMessage: String(err?.message ?? err) } });
  }
});
