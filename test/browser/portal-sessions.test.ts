import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Route } from 'playwright-core';
import { callServer, runCli, startServer } from '../process.js';
import { cleanupsInReverse } from '../support/cleanups.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, launchLocalOnly, skip } from './chromium.js';

// /portal in one tab, two people. A read of alice's webhooks still in flight
// when alice signs out and bob signs in was drawn on bob's page, left an error naming alice's
// webhook, and sent bob's token to alice's webhook id. A read belongs to the session that started
// it: signing out ends it, and signing in reads for the new session. Alice's read is held by the
// test (a route that answers only when told) until bob has signed in.

const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';

async function mint(env: NodeJS.ProcessEnv, subject: string): Promise<string> {
  const minted = await runCli(['token', 'create', '--subject', subject, '--scopes', SCOPES, '--json'], env);
  assert.equal(minted.code, 0, minted.stderr);
  return (JSON.parse(minted.stdout) as { token: string }).token;
}

test(
  "a read of one session is never drawn on the next's page, nor sent with its token",
  { timeout: BROWSER_TEST_TIMEOUT_MS, skip },
  async (t) => {
    assert.ok(existsSync(CHROMIUM), MISSING);
    const cleanups = cleanupsInReverse(t);
    const dir = await mkdtemp(join(tmpdir(), 'plant-store-portal-sessions-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const env = { DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}` };
    const alice = await mint(env, 'alice');
    const bob = await mint(env, 'bob');
    const server = await startServer(env);
    cleanups.push(() => server.stop());
    const made = await callServer(server, alice, 'POST', '/webhooks', '{"url":"https://hooks.example.com/alice"}');
    assert.equal(made.status, 201, made.text);
    const alicesWebhook = (JSON.parse(made.text) as { id: string }).id;

    const browser = await launchLocalOnly();
    cleanups.push(() => browser.close());
    const page = await browser.newPage();
    page.setDefaultTimeout(PATIENCE_MS);
    const sent: Array<{ path: string; token: string }> = [];
    page.on('request', (request) => {
      const token = (request.headers().authorization ?? '').replace(/^Bearer /, '');
      if (token !== '') sent.push({ path: new URL(request.url()).pathname, token });
    });
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => void pageErrors.push(error.message));

    // Alice's reads of her webhooks are held once `hold` is set, until `release` is called.
    let hold = false;
    let held: Route | undefined;
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    let heldSeen: () => void = () => {};
    const heldNow = new Promise<void>((resolve) => (heldSeen = resolve));
    await page.route('**/webhooks', async (route) => {
      const isAlice = route.request().headers().authorization === `Bearer ${alice}`;
      if (hold && isAlice && held === undefined) {
        held = route;
        heldSeen();
        await released;
      }
      await route.continue().catch(() => {}); // a read ended by signing out is gone
    });

    await page.goto(`${server.url}/portal`);
    await page.getByLabel('API token').fill(alice);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('listitem', { name: 'https://hooks.example.com/alice' }).waitFor();

    hold = true;
    await page.getByRole('button', { name: 'Refresh' }).click();
    await heldNow; // alice's read is on the wire
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').fill(bob);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('No webhooks yet').waitFor();
    release();
    // Bob's page reads again (Refresh): by then alice's answer, if it were drawn, would be drawn.
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.getByText('No webhooks yet').waitFor();

    assert.equal(await page.getByRole('listitem', { name: 'https://hooks.example.com/alice' }).count(), 0);
    assert.equal(await page.getByText(alicesWebhook).count(), 0, "nothing on bob's page names alice's webhook");
    const alerts = (await page.getByRole('alert').allInnerTexts()).filter((text) => text.trim() !== '');
    assert.deepEqual(alerts, [], 'no error shown');
    assert.deepEqual(
      sent.filter((s) => s.token === bob && s.path.includes(alicesWebhook)),
      [],
      "bob's token never went to alice's webhook",
    );
    assert.ok(
      sent.some((s) => s.token === bob && s.path.endsWith('/webhooks')),
      'bob read his webhooks',
    );
    assert.deepEqual(pageErrors, []);
  },
);
