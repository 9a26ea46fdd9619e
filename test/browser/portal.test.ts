import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Locator, Page } from 'playwright-core';
import { Webhook as Verifier } from 'standardwebhooks';
import { Receiver } from '../e2e/webhook-receiver.js';
import { callServer, runCli, startServer } from '../process.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, launchLocalOnly, skip } from './chromium.js';
import { cleanupsInReverse } from '../support/cleanups.js';

// The subscribers' page at /portal, driven in Debian's Chromium as a person
// would, by role and accessible name (no CSS selector), against one server and a receiver on
// 127.0.0.1. One browser, one server: the steps run in order on one page.

const SCREENSHOT = fileURLToPath(new URL('../../test-output/portal.png', import.meta.url));
const AXE = fileURLToPath(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url));

const XSS = '<img src=x onerror=alert(1)>';
/** Beyond 2^53: the feed must show it exactly as the server sent it. */
const BIG_ID = '9007199254740993';
const FULL = 'plants:read,plants:write,webhooks:read,webhooks:write';

async function mint(env: NodeJS.ProcessEnv, scopes: string): Promise<string> {
  const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', scopes, '--json'], env);
  assert.equal(minted.code, 0, minted.stderr);
  return (JSON.parse(minted.stdout) as { token: string }).token;
}

/** The role and name of what has keyboard focus, as the test names controls. */
const FOCUSED = `(() => {
  const element = document.activeElement;
  if (!element || element === document.body) return '';
  const label = element.labels && element.labels[0] ? element.labels[0].textContent : '';
  return element.tagName.toLowerCase() + ':' + (label || element.textContent || '').trim().replace(/\\s+/g, ' ');
})()`;
/** Every control a person could use now (shown, enabled), named as FOCUSED names them. */
const CONTROLS = `[...document.querySelectorAll('button, input, select, textarea, a[href]')]
  .filter((element) => element.getClientRects().length > 0 && !element.disabled)
  .map((element) => {
    const label = element.labels && element.labels[0] ? element.labels[0].textContent : '';
    return element.tagName.toLowerCase() + ':' + (label || element.textContent || '').trim().replace(/\\s+/g, ' ');
  })`;

test(
  'the portal in headless Chromium: sign in, manage a webhook, follow its deliveries and the feed',
  {
    timeout: BROWSER_TEST_TIMEOUT_MS,
    skip,
  },
  async (t) => {
    assert.ok(existsSync(CHROMIUM), MISSING);
    // Undone in reverse order: the browser, the server, the receiver, then the database.
    const cleanups = cleanupsInReverse(t);
    const dir = await mkdtemp(join(tmpdir(), 'plant-store-portal-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const receiver = new Receiver();
    await receiver.start();
    cleanups.push(() => receiver.stop());
    const env = {
      DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}`,
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_RETRY_SCHEDULE: '0s,300ms,300ms',
    };
    const token = await mint(env, FULL);
    const plantsOnly = await mint(env, 'plants:read,plants:write');
    const server = await startServer(env);
    cleanups.push(() => server.stop());
    const origin = server.url;
    const createPlant = async (body: string): Promise<void> => {
      const r = await callServer(server, token, 'POST', '/plants', body);
      assert.equal(r.status, 200, r.text);
    };

    const browser = await launchLocalOnly();
    cleanups.push(() => browser.close());
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
    const requests: string[] = [];
    const consoleErrors: string[] = [];
    const alerts: string[] = [];
    const refused: string[] = [];
    context.on('request', (request) => void requests.push(request.url()));
    context.on('response', (response) => {
      if (response.status() >= 400) refused.push(`${response.status()} ${new URL(response.url()).pathname}`);
    });
    const page: Page = await context.newPage();
    page.setDefaultTimeout(PATIENCE_MS);
    page.on('console', (message) => {
      // Chromium logs each 4xx answer as an error too; those are checked one by one below (refused).
      const text = message.text();
      if (
        message.type() === 'error' &&
        !text.startsWith('Failed to load resource: the server responded with a status of')
      )
        consoleErrors.push(text);
    });
    page.on('pageerror', (error) => void consoleErrors.push(error.message));
    page.on('dialog', (dialog) => {
      alerts.push(dialog.message());
      void dialog.dismiss();
    });
    const webhookItem = (): Locator => page.getByRole('listitem', { name: receiver.url });
    const deliveryRow = (...texts: string[]): Locator =>
      texts.reduce((rows, text) => rows.filter({ hasText: text }), page.getByRole('row'));
    /** A sentence in one of the page's status lines (role status: read out politely). */
    const said = (text: string | RegExp): Locator => page.getByRole('status').getByText(text);

    try {
      await t.test('GET /portal answers the page with a strict CSP, nosniff and no referrer', async () => {
        const response = await page.goto(`${origin}/portal`);
        assert.equal(response?.status(), 200);
        assert.ok(response);
        const headers = response.headers();
        assert.equal(
          headers['content-security-policy'],
          "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        );
        assert.equal(headers['x-content-type-options'], 'nosniff');
        assert.equal(headers['referrer-policy'], 'no-referrer');
        assert.match(headers['content-type']!, /^text\/html; charset=utf-8$/);
        assert.equal(await page.title(), 'Plant Store · Webhooks');
      });

      await t.test('a token without webhooks:read is told which scope it lacks', async () => {
        await page.getByLabel('API token').fill(plantsOnly);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByText('This token lacks the webhooks:read scope').waitFor();
        assert.equal(await page.evaluate('sessionStorage.length'), 0, 'a refused token is not kept');
      });

      await t.test('signing in keeps the token in sessionStorage only', async () => {
        await page.getByLabel('API token').fill(token);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await page.getByText('No webhooks yet').waitFor();
        assert.deepEqual(await page.evaluate('Object.values(sessionStorage)'), [token]);
        assert.equal(await page.evaluate('localStorage.length'), 0);
        assert.deepEqual(await context.cookies(), []);
        assert.equal(await page.getByLabel('API token').isVisible(), false, 'the sign-in field is gone');
        await page.reload();
        await page.getByText('No webhooks yet').waitFor();
        assert.equal(await page.getByLabel('API token').isVisible(), false, 'a reload of the tab stays signed in');
      });

      let secret = '';
      await t.test(
        'Add webhook shows the secret once, with a copy button; the XSS description stays text',
        async () => {
          await page.getByRole('button', { name: 'Add webhook' }).click();
          const form = page.getByRole('dialog', { name: 'Add webhook' });
          await form.getByLabel('URL').fill(receiver.url);
          await form.getByLabel('Description').fill(XSS);
          assert.ok(await form.getByRole('checkbox', { name: 'plant.created' }).isChecked());
          await form.getByRole('button', { name: 'Create webhook' }).click();
          const shown = page.getByRole('dialog', { name: 'Signing secret' });
          await shown.getByText('This secret will not be shown again.').waitFor();
          secret = await shown.getByLabel('Signing secret').inputValue();
          const focused = await page.evaluate("document.activeElement?.labels?.[0]?.textContent ?? ''");
          assert.equal(focused, 'Signing secret', 'keyboard focus is on the secret, in its dialog');
          assert.match(secret, /^whsec_[A-Za-z0-9+/=]{32,}$/);
          await shown.getByRole('button', { name: 'Copy secret' }).click();
          await shown.getByText('Copied to the clipboard.').waitFor();
          assert.equal(await page.evaluate('navigator.clipboard.readText()'), secret);
          await shown.getByRole('button', { name: 'Done' }).click();
          receiver.secret = secret;

          await webhookItem().getByText(XSS, { exact: true }).waitFor();
          assert.equal(await page.evaluate("document.querySelectorAll('img').length"), 0, 'no element was made of it');
          assert.match(await webhookItem().innerText(), /plant\.created, plant\.deleted/);
          assert.match(await webhookItem().innerText(), /\bactive\b/);
        },
      );

      await t.test('a plant created through the API appears on the live feed, exactly', async () => {
        await page.getByText('Following: new events appear here as they happen.').waitFor();
        await createPlant(`{"id":${BIG_ID},"name":"Monstera","tag":"tropical"}`);
        const feed = page.getByRole('log', { name: 'Events, newest first' });
        await feed.getByText(`{"id":${BIG_ID},"name":"Monstera","tag":"tropical"}`).waitFor();
        assert.match(await feed.innerText(), /plant\.created #1 /);
      });

      await t.test(
        'the panels side by side need no sections bar; each event type is a 24×24 px target or more',
        async () => {
          assert.equal(await page.getByRole('navigation', { name: 'Sections' }).isVisible(), false);
          for (const name of ['plant.created', 'plant.deleted']) {
            // A tap or click on its label toggles the checkbox: the label is the target.
            const label = page.getByRole('group', { name: 'Event types' }).locator('label', { hasText: name });
            const box = await label.boundingBox();
            assert.ok(box !== null && box.width >= 24 && box.height >= 24, `${name}'s label: ${JSON.stringify(box)}`);
          }
        },
      );

      await t.test('its delivery is shown, and opens to its attempts', async () => {
        await deliveryRow('delivered', 'plant.created').waitFor();
        await receiver.until((received) => received.some((r) => r.body.includes(BIG_ID) && r.verified), PATIENCE_MS);
        await deliveryRow('delivered', 'plant.created').getByRole('button', { name: 'Show attempts' }).click();
        const attempts = page.getByRole('table', { name: /^Attempts of delivery \d+, newest first$/ });
        await attempts.waitFor();
        const [attempt] = await attempts.getByRole('row').filter({ hasText: ' ms' }).allInnerTexts();
        assert.match(String(attempt), /^1\t.+\t200\t\d+ ms\t—\t\s*\(empty\)$/);
      });

      await t.test('Ping sends a signed webhook.ping', async () => {
        await webhookItem().getByRole('button', { name: 'Ping' }).click();
        await deliveryRow('delivered', 'webhook.ping').waitFor();
        await receiver.until((received) => received.some((r) => r.type === 'webhook.ping' && r.verified), PATIENCE_MS);
      });

      await t.test('Retry sends one delivery again, with the same webhook-id', async () => {
        const first = receiver.received.find((r) => r.body.includes(BIG_ID))!;
        await deliveryRow('delivered', 'plant.created').getByRole('button', { name: 'Retry' }).click();
        await said(/^Delivery \d+ is sent again\.$/).waitFor();
        await receiver.until((received) => received.filter((r) => r.id === first.id).length === 2, PATIENCE_MS);
      });

      await t.test('a broken receiver fails the delivery; fixed, Recover sends it again', async () => {
        receiver.respondWith(() => 500);
        await createPlant('{"id":2,"name":"Fern"}');
        await deliveryRow('failed', 'plant.created', '(HTTP 500)').waitFor();
        await webhookItem()
          .getByText(/^failing since .+ \((just now|1 minute ago)\)$/)
          .waitFor();
        receiver.respondWith(() => 200);
        const opened = Math.floor(Date.now() / 1000) * 1000; // the field holds whole seconds
        await page.getByRole('button', { name: 'Recover failed since…' }).click();
        const recover = page.getByRole('dialog', { name: 'Recover failed deliveries' });
        // 24 hours back, in local time, to the second; a datetime-local value leaves out ":00" seconds.
        const since = await recover.getByLabel('Failed since').inputValue();
        const read = Date.now();
        assert.match(since, /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?$/);
        const sinceMs = new Date(since).getTime(); // no offset: local time, as the browser wrote it
        assert.ok(sinceMs >= opened - 86_400_000 && sinceMs <= read - 86_400_000, `${since} is 24 hours back`);
        await recover.getByRole('button', { name: 'Recover' }).click();
        await said('1 failed delivery is pending again.').waitFor();
        await receiver.until((received) => received.some((r) => r.body === '{"id":2,"name":"Fern"}'), PATIENCE_MS);
        await webhookItem()
          .getByText(/^failing since/)
          .waitFor({ state: 'detached' });
        // Its attempt log tells the story: three refusals, then the recovered delivery.
        const fern = page.getByRole('row').filter({ has: page.getByRole('cell', { name: '2', exact: true }) });
        await fern.filter({ hasText: 'delivered' }).waitFor();
        await fern.getByRole('button', { name: 'Show attempts' }).click();
        const log = page
          .getByRole('table', { name: /^Attempts of delivery \d+, newest first$/ })
          .filter({ hasText: '500' });
        await log.getByRole('row').nth(4).waitFor();
        const statuses = (await log.getByRole('row').allInnerTexts()).slice(1).map((row) => row.split('\t')[2]);
        assert.deepEqual(statuses, ['200', '500', '500', '500']);
      });

      await t.test('Rotate secret shows the new one once; both sign during the overlap', async () => {
        await webhookItem().getByRole('button', { name: 'Rotate secret' }).click();
        const rotate = page.getByRole('dialog', { name: 'Rotate secret' });
        await rotate.getByLabel('Old secret keeps signing for').selectOption({ label: '1 day' });
        await rotate.getByRole('button', { name: 'Rotate secret' }).click();
        const shown = page.getByRole('dialog', { name: 'Signing secret' });
        await shown.getByText(/^The old secret keeps signing beside this one until /).waitFor();
        const rotated = await shown.getByLabel('Signing secret').inputValue();
        assert.match(rotated, /^whsec_/);
        assert.notEqual(rotated, secret);
        await shown.getByRole('button', { name: 'Done' }).click();

        await createPlant('{"id":3,"name":"Cactus"}');
        await receiver.until((received) => received.some((r) => r.body === '{"id":3,"name":"Cactus"}'), PATIENCE_MS);
        const delivery = receiver.received.find((r) => r.body === '{"id":3,"name":"Cactus"}')!;
        const headers = delivery.headers as Record<string, string>;
        assert.equal(headers['webhook-signature']!.split(' ').length, 2, 'two signatures');
        for (const key of [secret, rotated]) new Verifier(key).verify(delivery.body, headers); // throws when not
      });

      await t.test('the chart counts the last 24 hours of attempts: the three 500s are its failures', async () => {
        await page.getByRole('button', { name: 'Refresh' }).click();
        await page.getByRole('img', { name: /^Attempts in the last 24 hours: \d+ delivered, 3 failed$/ }).waitFor();
        await page.getByText(/^Last 24 hours: \d+ delivered, 3 failed attempts\.$/).waitFor();
      });

      await t.test('Edit changes the description; Disable and Enable say so in words', async () => {
        await webhookItem().getByRole('button', { name: 'Edit' }).click();
        const form = page.getByRole('dialog', { name: 'Edit webhook' });
        assert.equal(await form.getByLabel('Description').inputValue(), XSS);
        await form.getByLabel('Description').fill('Greenhouse inventory sync');
        await form.getByRole('button', { name: 'Save changes' }).click();
        await webhookItem().getByText('Greenhouse inventory sync', { exact: true }).waitFor();
        await webhookItem().getByRole('button', { name: 'Disable' }).click();
        await webhookItem().getByText('disabled by you', { exact: true }).waitFor();
        // Interface 1.3.0: no page promises that the events of a pause wait; Enable offers to send them.
        await said(
          /^Disabled .+: nothing is sent to it, and the events meanwhile are not kept for it; Enable can send them\.$/,
        ).waitFor();
        await createPlant('{"id":77,"name":"Paused palm"}');
        await webhookItem().getByRole('button', { name: 'Enable' }).click();
        const enable = page.getByRole('dialog', { name: 'Enable webhook' });
        await enable.getByText('The events of the pause were not sent and are not waiting', { exact: false }).waitFor();
        await enable.getByLabel('Also send what was paused').check();
        await enable.getByRole('button', { name: 'Enable' }).click();
        await said(/^Enabled .+\. 1 event of the pause is sent[.,]/).waitFor();
        await webhookItem().getByText('active', { exact: true }).waitFor();
        await receiver.until(
          (received) => received.some((r) => r.body === '{"id":77,"name":"Paused palm"}'),
          PATIENCE_MS,
        );
        // Enabled without the option, a pause's events stay unsent: disable, create, enable.
        await webhookItem().getByRole('button', { name: 'Disable' }).click();
        await webhookItem().getByText('disabled by you', { exact: true }).waitFor();
        await createPlant('{"id":78,"name":"Skipped sage"}');
        await webhookItem().getByRole('button', { name: 'Enable' }).click();
        await enable.getByRole('button', { name: 'Enable' }).click();
        await said(/^Enabled .+: new events are sent to it\.$/).waitFor();
        await webhookItem().getByText('active', { exact: true }).waitFor();
        await createPlant('{"id":79,"name":"After basil"}');
        await receiver.until((received) => received.some((r) => r.body.includes('After basil')), PATIENCE_MS);
        assert.ok(!receiver.received.some((r) => r.body.includes('Skipped sage')), 'the pause was not sent');
      });

      await t.test('an axe-core scan finds no serious or critical violation', async () => {
        await page.evaluate(await readFile(AXE, 'utf8'));
        const violations = await page.evaluate<Array<{ id: string; impact: string; nodes: string[] }>>(
          "axe.run(document).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) })))",
        );
        const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
        assert.deepEqual(serious, []);
        if (violations.length > 0) t.diagnostic(`minor axe findings: ${JSON.stringify(violations)}`);
      });

      await t.test('every control is reachable with the keyboard', async () => {
        const all = await page.evaluate<string[]>(CONTROLS);
        const controls = new Set(all);
        const reached = new Set<string>();
        await page.evaluate('document.activeElement && document.activeElement.blur()');
        const missing = (): string[] => [...controls].filter((control) => !reached.has(control));
        // Twice round the page at most: Tab goes on from where focus last was, and wraps.
        for (let i = 0; i < all.length * 2 + 10 && missing().length > 0; i++) {
          await page.keyboard.press('Tab');
          reached.add(await page.evaluate<string>(FOCUSED));
        }
        assert.deepEqual(missing(), [], `reached: ${[...reached].join(', ')}`);
      });
    } finally {
      // Also when a step failed: that is when the picture helps most. No focus ring in it.
      await page.evaluate('document.activeElement && document.activeElement.blur()');
      await mkdir(dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      t.diagnostic(`screenshot of /portal: ${SCREENSHOT}`);
    }

    await t.test('Older deliveries follows the Link header, Newer deliveries comes back', async () => {
      // 6 deliveries so far (3 plants, the ping, and the two plants of the Enable test) and 15
      // more: 21, one more than a page.
      for (let id = 100; id < 115; id++) await createPlant(`{"id":${id},"name":"Seedling ${id}"}`);
      await receiver.until((received) => received.some((r) => r.body.includes('"id":114')), PATIENCE_MS);
      const first = page
        .getByRole('row')
        .filter({ hasText: 'plant.created', has: page.getByRole('cell', { name: '1', exact: true }) });
      await page.getByRole('button', { name: 'Older deliveries' }).click();
      await first.waitFor();
      const deliveries = page.getByRole('table', { name: 'Deliveries, newest first' });
      assert.equal(await deliveries.getByRole('row').count(), 2, 'the heading and the oldest delivery');
      assert.equal(await page.getByRole('button', { name: 'Older deliveries' }).isVisible(), false, 'the last page');
      await page.getByRole('button', { name: 'Newer deliveries' }).click();
      await first.waitFor({ state: 'detached' });
      assert.equal(await page.getByRole('button', { name: 'Newer deliveries' }).isVisible(), false, 'the first page');
    });

    await t.test('the live feed keeps to the types chosen', async () => {
      await page.getByRole('checkbox', { name: 'plant.created' }).uncheck();
      await page.getByText('Following: new events appear here as they happen.').waitFor();
      await createPlant('{"id":200,"name":"Orchid"}');
      const gone = await callServer(server, token, 'DELETE', '/plants/200');
      assert.equal(gone.status, 204);
      const feed = page.getByRole('log', { name: 'Events, newest first' });
      await feed.getByText('{"id":200}', { exact: true }).waitFor();
      // The stream is in id order: had the creation not been filtered out, it would be there by now.
      assert.equal(await feed.getByText('{"id":200,"name":"Orchid"}').count(), 0);
      assert.ok(requests.some((url) => url === `${origin}/events?types=plant.deleted`));
      await page.getByRole('checkbox', { name: 'plant.created' }).check();
    });

    await t.test('Delete asks first, then removes the webhook', async () => {
      await webhookItem().getByRole('button', { name: 'Delete' }).click();
      const confirm = page.getByRole('dialog', { name: 'Delete webhook?' });
      await confirm.getByRole('button', { name: 'Delete webhook' }).click();
      await page.getByText('No webhooks yet').waitFor();
    });

    await t.test('Sign out forgets the token', async () => {
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByLabel('API token').waitFor();
      assert.equal(await page.evaluate('sessionStorage.length'), 0);
    });

    await t.test('every request went to the server itself; no token in a URL, no script error, no alert', () => {
      assert.deepEqual(refused, ['403 /webhooks'], 'the only refusal: the token without webhooks:read');
      assert.ok(requests.length > 10, requests.join('\n'));
      assert.deepEqual(
        requests.filter((url) => new URL(url).origin !== origin),
        [],
      );
      assert.deepEqual(
        requests.filter((url) => url.includes(token) || url.includes(plantsOnly)),
        [],
      );
      assert.deepEqual(consoleErrors, [], 'no script error, and no Content-Security-Policy violation');
      assert.deepEqual(alerts, []);
    });
  },
);
