import { type Browser, chromium } from 'playwright-core';
import { requireSystemTools } from './prerequisites';

/** Debian's Chromium (or CHROMIUM_PATH): the browser the page tests drive; nothing is downloaded. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Chromium headless on a fresh temporary profile of playwright-core's own (removed when the browser closes), quiet:
 * no network of its own (updates, sync, QUIC) beside what a test's page asks for.
 */
export async function launchChromium(): Promise<Browser> {
  requireSystemTools(CHROMIUM_PATH);
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}
