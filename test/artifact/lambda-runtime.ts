import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';

const BOOTSTRAP = fileURLToPath(new URL('./lambda-bootstrap.mjs', import.meta.url));

export interface LocalFunctionOptions {
  /** The function's logical id (for messages). */
  id: string;
  /** The asset directory of its code in cdk.out. */
  codeDir: string;
  /** The template's handler string (`index.handler`). */
  handler: string;
  /** The template's timeout, in seconds: the invocation's deadline. */
  timeoutSeconds: number;
  /** Everything the process sees: the template's variables and what Lambda adds. */
  env: Record<string, string>;
  /** The Node binary of the runtime (Node 22, as the template's runtime says). */
  node: string;
}

export interface Invocation {
  result?: any;
  error?: { errorType: string; errorMessage: string };
}

/**
 * One function as the Lambda runtime runs it: a process (a warm execution environment) that imports the handler
 * once, then takes invocations one at a time, each with its deadline; past the deadline the process is ended
 * ("Task timed out") and the next invocation starts a new one (a cold start).
 */
export class LocalFunction {
  private child?: ChildProcess;
  private ready?: Promise<void>;
  private readonly pending = new Map<string, (answer: Invocation) => void>();
  readonly logs: string[] = [];
  invocations = 0;
  nodeVersion = '';

  constructor(readonly options: LocalFunctionOptions) {}

  private start(clockOffsetMs: number): Promise<void> {
    const { codeDir, handler, node, id } = this.options;
    const env = { ...this.options.env, ARTIFACT_CLOCK_OFFSET_MS: String(clockOffsetMs) };
    const child = fork(BOOTSTRAP, [codeDir, handler], {
      execPath: node,
      env,
      cwd: codeDir,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      serialization: 'json',
    });
    this.child = child;
    const keep = (chunk: Buffer) => {
      this.logs.push(chunk.toString());
      if (this.logs.length > 2000) this.logs.splice(0, 1000);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    this.ready = new Promise<void>((resolve, reject) => {
      child.on('message', (message: any) => {
        if (message.type === 'ready') {
          this.nodeVersion = message.node;
          resolve();
        } else if (message.type === 'init-error') reject(new Error(`${id} failed to initialize: ${message.error}`));
        else this.pending.get(message.id)?.(message.type === 'result' ? { result: message.result } : { error: message.error });
      });
      child.on('exit', (code, signal) => {
        if (this.child === child) this.child = undefined;
        reject(new Error(`${id} exited during init (${code ?? signal}): ${this.logs.join('').slice(-2000)}`));
        for (const [key, settle] of this.pending) {
          this.pending.delete(key);
          settle({ error: { errorType: 'Runtime.ExitError', errorMessage: `the process exited (${code ?? signal})` } });
        }
      });
    });
    return this.ready;
  }

  /** One invocation; `clockOffsetMs` is how far the function's clock runs ahead of the machine's. */
  async invoke(event: unknown, clockOffsetMs = 0): Promise<Invocation> {
    if (!this.child) await this.start(clockOffsetMs);
    else await this.ready;
    this.invocations++;
    const id = randomUUID();
    const deadline = Date.now() + this.options.timeoutSeconds * 1000;
    return new Promise<Invocation>((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        const child = this.child;
        this.child = undefined;
        child?.kill('SIGKILL');
        resolve({ error: { errorType: 'Sandbox.Timedout', errorMessage: `Task timed out after ${this.options.timeoutSeconds} seconds` } });
      }, this.options.timeoutSeconds * 1000);
      this.pending.set(id, (answer) => {
        clearTimeout(timer);
        this.pending.delete(id);
        resolve(answer);
      });
      this.child!.send({ id, event, deadline, clockOffsetMs, requestId: id });
    });
  }

  stop() {
    const child = this.child;
    this.child = undefined;
    child?.kill('SIGKILL');
  }
}
