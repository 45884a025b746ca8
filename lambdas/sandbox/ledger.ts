import { listAllOrders } from '../mcp/tools/orders';
import type { Services } from 'idempotent-mcp/mcp';
import { openSandboxStore } from './sandbox-store';

/** One section per sandbox downstream: what it executed, with the tenant and key (or event id) on every entry. */
export type LedgerSection = (services: Services) => Promise<unknown[]>;

/** Add a downstream's section here; `GET /sandbox/ledger` returns them all. */
export const ledgerSections: Record<string, LedgerSection> = {
  orders: (services) => listAllOrders(services.doc, services.tableName),
  payments: async (services) => (await openSandboxStore(services)?.payments()) ?? [],
  tickets: async (services) => (await openSandboxStore(services)?.tickets()) ?? [],
  emails: async (services) => (await openSandboxStore(services)?.emails()) ?? [],
};

export async function readLedger(services: Services): Promise<Record<string, unknown[]>> {
  const entries = await Promise.all(
    Object.entries(ledgerSections).map(async ([name, read]) => [name, await read(services)] as const),
  );
  return Object.fromEntries(entries);
}
