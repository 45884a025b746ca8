import type { EventPublisher, OutboxMessage } from 'idempotent-mcp/dynamodb';
import type { SandboxStore } from './sandbox-store';

/**
 * Wraps the relay's publisher with the sandbox's queue faults: under `duplicate-delivery` the next event is put on
 * the queue twice, as SQS at-least-once delivery may do on its own. Used only where the sandbox is enabled.
 */
export class FaultInjectingPublisher implements EventPublisher {
  constructor(
    private readonly inner: EventPublisher,
    private readonly sandbox: SandboxStore,
  ) {}

  async publish(messages: OutboxMessage[]): Promise<{ failed: string[] }> {
    const doubled: OutboxMessage[] = [];
    for (const message of messages) {
      const fault = await this.sandbox.takeFault('queue');
      doubled.push(message);
      if (fault?.mode === 'duplicate-delivery') doubled.push(message);
    }
    const { failed } = await this.inner.publish(doubled);
    return { failed: [...new Set(failed)] };
  }
}
