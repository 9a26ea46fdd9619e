import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Debian's Chromium: playwright-core's own browser download does not work on these machines. */
export const CHROMIUM = '/usr/bin/chromium';

export const MISSING =
  `this test drives Chromium at ${CHROMIUM}, which is missing: install it with \`apt-get install chromium\` ` +
  "(Debian's package; playwright-core's own browser download is not used)";

/**
 * CI (which installs Chromium when missing) must run the browser tests; on a laptop without
 * Chromium, `npm test` still passes and they are reported as skipped, with the reason.
 */
export const skip = !existsSync(CHROMIUM) && process.env.CI !== 'true' ? MISSING : false;

/**
 * How long a browser test waits for a condition (an element shown, a click's target ready, a
 * screenshot taken) before it fails: a deadline, never a speed asserted. A step takes
 * milliseconds on a quiet machine; on a slow host with a core kept busy (CI's \`test:timing\`) one
 * took over 15 s, so a fixed 10 or 15 s failed tests that were right. Waits end as soon as the
 * condition holds, so a generous deadline costs nothing when the test passes.
 */
export const PATIENCE_MS = 60_000;

/** A whole browser test file's deadline: its steps, each within PATIENCE_MS, and the browser's start. */
export const BROWSER_TEST_TIMEOUT_MS = 15 * PATIENCE_MS;

/** Headless Chromium that reaches nothing but 127.0.0.1: every host name fails to resolve, and nothing runs in the background. */
export function launchLocalOnly(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
}
