import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { callServer, mintCliToken, startServer } from '../process.js';
import { cleanupsInReverse } from '../support/cleanups.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, launchLocalOnly, skip } from './chromium.js';

// A destination on /portal (docs/portal.md): listed by its broker and subject, its target shown
// but not edited in the form, and an edit of its description sent without a url. BROKERS names a
// broker the server never needs to reach here: nothing is delivered.

test(
  'the portal shows a destination by its broker and subject, and edits it without touching its target',
  { timeout: BROWSER_TEST_TIMEOUT_MS, skip },
  async (t) => {
    assert.ok(existsSync(CHROMIUM), MISSING);
    const cleanups = cleanupsInReverse(t);
    const dir = await mkdtemp(join(tmpdir(), 'plant-store-portal-destination-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const env = {
      DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}`,
      BROKERS: 'events=nats://127.0.0.1:4222?allow=acme.plants',
    };
    const token = await mintCliToken(env, 'alice', 'webhooks:read,webhooks:write');
    const server = await startServer(env);
    cleanups.push(() => server.stop());
    const made = await callServer(
      server,
      token,
      'POST',
      '/webhooks',
      JSON.stringify({ destination: { broker: 'events', subject: 'acme.plants.mirror' } }),
    );
    assert.equal(made.status, 201, made.text);
    const id = (JSON.parse(made.text) as { id: string }).id;

    const browser = await launchLocalOnly();
    cleanups.push(() => browser.close());
    const page = await browser.newPage();
    page.setDefaultTimeout(PATIENCE_MS);
    const patches: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'PATCH') patches.push(request.postData() ?? '');
    });
    await page.goto(`${server.url}/portal`);
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    const item = page.getByRole('listitem', { name: 'NATS events: acme.plants.mirror' });
    await item.waitFor();

    await item.getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('dialog', { name: 'Edit webhook' });
    const target = form.getByLabel('URL');
    assert.equal(await target.inputValue(), 'NATS events: acme.plants.mirror');
    assert.equal(await target.getAttribute('readonly'), '', 'shown, not edited');
    await form.getByLabel('Description').fill('Mirror of the plants');
    await form.getByRole('button', { name: 'Save changes' }).click();
    await item.getByText('Mirror of the plants', { exact: true }).waitFor();
    assert.deepEqual(
      patches.map((body) => JSON.parse(body) as unknown),
      [{ description: 'Mirror of the plants' }],
    );
    const listed = await callServer(server, token, 'GET', '/webhooks');
    assert.deepEqual(
      (JSON.parse(listed.text) as Array<{ id: string; url: unknown; destination: unknown; description: string }>).map(
        (w) => [w.id, w.url, w.destination, w.description],
      ),
      [[id, null, { broker: 'events', subject: 'acme.plants.mirror' }, 'Mirror of the plants']],
    );
  },
);
