import { listAllOrders } from '../tools/orders';
import type { ReferenceConfig } from '../config';
import { openSandboxStore, type SandboxServices } from './sandbox-store';

/** One section per sandbox downstream: what it executed, with the tenant and key (or event id) on every entry. */
type LedgerSection = (services: SandboxServices, config: ReferenceConfig) => Promise<unknown[]>;

/** Add a downstream's section here; `GET /sandbox/ledger` returns them all. */
const ledgerSections: Record<string, LedgerSection> = {
  orders: (services) => listAllOrders(services.doc, services.tableName),
  payments: async (services, config) => (await openSandboxStore(services, config)?.payments()) ?? [],
  tickets: async (services, config) => (await openSandboxStore(services, config)?.tickets()) ?? [],
  emails: async (services, config) => (await openSandboxStore(services, config)?.emails()) ?? [],
};

export async function readLedger(services: SandboxServices, config: ReferenceConfig): Promise<Record<string, unknown[]>> {
  const entries = await Promise.all(
    Object.entries(ledgerSections).map(async ([name, read]) => [name, await read(services, config)] as const),
  );
  return Object.fromEntries(entries);
}
