import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Locator, type Page, chromium } from 'playwright-core';
import { runCli, startServer } from '../process.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, skip } from './chromium.js';
import { cleanupsInReverse } from '../support/cleanups.js';

const SCREENSHOT = fileURLToPath(new URL('../../test-output/docs.png', import.meta.url));
const FAVICON = fileURLToPath(new URL('../../assets/favicon.svg', import.meta.url));
const FASTIFY_LOGO = fileURLToPath(new URL('../../node_modules/@fastify/swagger-ui/static/logo.svg', import.meta.url));
// Swagger UI never shows its online-validator badge (an image from validator.swagger.io) for a
// document on localhost or 127.0.0.1, so a page opened there could not catch it. The page is opened
// under this name instead, which Chromium maps to the server; every other name fails to resolve, so
// nothing leaves the machine even if a request slipped past the route below.
const HOST = 'plant-store.test';

const OPERATIONS = [
  { method: 'post', path: '/plants', operationId: 'addPlant' },
  { method: 'get', path: '/plants', operationId: 'findPlants' },
  { method: 'delete', path: '/plants/{id}', operationId: 'deletePlant' },
] as const;

type Operations = Record<string, Record<string, { summary?: string }>>;

/** An operation's block on the page, opened (a click on an open one would close it). */
async function openOperation(page: Page, id: string): Promise<Locator> {
  const block = page.locator(`.opblock[id$="-${id}"]`);
  assert.equal(await block.count(), 1, `one block for ${id}`);
  if (
    !String(await block.getAttribute('class'))
      .split(' ')
      .includes('is-open')
  )
    await block.locator('.opblock-summary').click();
  return block;
}

/** "Try it out", then "Execute", with the example values the page fills in: the status and body it shows. */
async function tryItOut(block: Locator): Promise<{ status: string; body: string; url: string }> {
  await block.locator('button.try-out__btn').click();
  await block.locator('button.execute').click();
  const response = block.locator('.live-responses-table .response');
  await response.first().waitFor();
  const body = response.locator('.response-col_description pre');
  return {
    status: (await response.locator('.response-col_status').first().innerText()).trim(),
    body: (await body.count()) > 0 ? await body.first().innerText() : '',
    url: (await block.locator('.request-url pre').innerText()).trim(),
  };
}

test('GET /docs in headless Chromium', { timeout: BROWSER_TEST_TIMEOUT_MS, skip }, async (t) => {
  assert.ok(existsSync(CHROMIUM), MISSING);
  // Undone in reverse order: the browser, the server, then its database.
  const cleanups = cleanupsInReverse(t);
  const dir = await mkdtemp(join(tmpdir(), 'plant-store-docs-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}` };
  const server = await startServer(env);
  cleanups.push(() => server.stop());
  const origin = `http://${HOST}:${new URL(server.url).port}`;
  const { paths } = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Operations };
  const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'], env);
  assert.equal(minted.code, 0, minted.stderr);
  const token = minted.stdout.trim();
  /** What the store holds for alice, asked of the server directly, not through the page. */
  const stored = async (): Promise<unknown> =>
    (await fetch(`${server.url}/plants`, { headers: { authorization: `Bearer ${token}` } })).json();

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--disable-gpu', `--host-resolver-rules=MAP ${HOST} 127.0.0.1, MAP * ~NOTFOUND`],
  });
  cleanups.push(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const requests: string[] = [];
  const elsewhere: string[] = [];
  const failed: string[] = [];
  const errorStatuses: string[] = [];
  const consoleErrors: string[] = [];
  await context.route('**/*', async (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    elsewhere.push(url);
    return route.abort('blockedbyclient');
  });
  context.on('request', (request) => void requests.push(`${request.method()} ${request.url()}`));
  context.on('requestfailed', (request) => void failed.push(`${request.url()}: ${request.failure()?.errorText}`));
  context.on('response', (response) => {
    if (response.status() >= 400) errorStatuses.push(`${response.status()} ${response.url()}`);
  });
  const page = await context.newPage();
  page.setDefaultTimeout(PATIENCE_MS);
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => void consoleErrors.push(error.message));

  try {
    const response = await page.goto(`${origin}/docs`);
    assert.equal(response?.status(), 200);
    await page.locator('.opblock').first().waitFor();
    await page.waitForLoadState('networkidle');

    await t.test('the page is titled Plant Store, with its own icon', async () => {
      assert.equal(await page.title(), 'Plant Store');
      const icons = page.locator('link[rel="icon"]');
      assert.equal(await icons.count(), 1, 'one icon');
      assert.equal(await icons.getAttribute('type'), 'image/svg+xml');
      const href = new URL(String(await icons.getAttribute('href')), page.url());
      assert.equal(href.origin, origin);
      const icon = await fetch(`${server.url}${href.pathname}`);
      assert.equal(icon.status, 200);
      assert.match(String(icon.headers.get('content-type')), /^image\/svg\+xml\b/);
      assert.deepEqual(Buffer.from(await icon.arrayBuffer()), await readFile(FAVICON));
    });

    await t.test('no top bar: no URL box to load another document, no Fastify logo', async () => {
      assert.equal(await page.locator('.topbar').count(), 0);
      assert.equal(await page.locator('input.download-url-input').count(), 0);
      assert.equal(await page.locator('img').count(), 0, 'no image on the page');
      // Not even unused in the page's script.
      const script = await (await fetch(`${server.url}/docs/static/swagger-initializer.js`)).text();
      assert.ok(
        !script.includes((await readFile(FASTIFY_LOGO)).toString('base64')),
        "Fastify's logo is not in the page",
      );
    });

    await t.test('the introduction above the operations says how to get a token', async () => {
      const intro = await page.locator('.information-container .description').innerText();
      assert.match(intro, /(?<!npx )plant-store token create --subject alice --scopes plants:read,plants:write/);
      assert.match(intro, /Authorize/);
    });

    await t.test('the heading names the API, its version and OpenAPI 3.1', async () => {
      const heading = await page.locator('.information-container .title').innerText();
      assert.match(heading, /^Plant Store\b/);
      assert.match(heading, /\b1\.4\.0\b/);
      assert.match(heading, /\bOAS 3\.1\b/);
    });

    await t.test('addPlant, findPlants and deletePlant are shown with their method, path and summary', async () => {
      for (const { method, path, operationId } of OPERATIONS) {
        const summary = paths[path]?.[method]?.summary;
        assert.ok(summary, `the document gives ${operationId} a summary`);
        const block = page
          .locator(`.opblock.opblock-${method}`)
          .filter({ has: page.locator(`.opblock-summary-path[data-path="${path}"]`) });
        assert.equal(await block.count(), 1, `one ${method.toUpperCase()} ${path} block`);
        assert.ok(await block.isVisible(), `${method.toUpperCase()} ${path} is visible`);
        assert.equal((await block.locator('.opblock-summary-method').innerText()).trim(), method.toUpperCase());
        assert.equal((await block.locator('.opblock-summary-description').innerText()).trim(), summary);
        assert.equal(await block.locator(`a[href$="/${operationId}"]`).count(), 1, `${operationId} links to itself`);
      }
    });

    await t.test('expanding GET /plants shows limit: an integer query parameter, default 100', async () => {
      await page.locator('.opblock-get .opblock-summary-path[data-path="/plants"]').click();
      const limit = page.locator('.opblock-get tr[data-param-name="limit"]');
      await limit.waitFor();
      assert.equal(await limit.getAttribute('data-param-in'), 'query');
      assert.match(await limit.locator('.parameter__type').innerText(), /^integer\b/);
      assert.match(await limit.locator('.parameter__default').innerText(), /:\s*100$/);
      await page.waitForLoadState('networkidle');
    });

    await t.test('Authorize takes a bearer token', async () => {
      await page.locator('.scheme-container button.authorize').click();
      const dialog = page.locator('.modal-ux');
      // Two schemes (1.3.0): the bearer token, and the change feed's ticket (GET /events only).
      const bearer = dialog.locator('.auth-container').filter({ hasText: 'bearerAuth' });
      assert.equal(await dialog.locator('.auth-container').filter({ hasText: 'eventTicket' }).count(), 1);
      await bearer.locator('input').fill(token);
      await bearer.locator('.auth-btn-wrapper button.authorize').click();
      await bearer.locator('button.btn-done').click();
      assert.equal(await dialog.count(), 0, 'the dialog is closed');
      assert.equal(await page.locator('.scheme-container button.authorize.locked').count(), 1, 'authorized');
    });

    await t.test('"Try it out" creates the example plant: 200, and the store has it', async () => {
      const shown = await tryItOut(await openOperation(page, 'addPlant'));
      assert.equal(shown.url, `${origin}/plants`);
      assert.equal(shown.status, '200', shown.body);
      assert.deepEqual(JSON.parse(shown.body), { name: 'Monstera', tag: 'tropical' });
      assert.deepEqual(await stored(), [{ name: 'Monstera', tag: 'tropical' }]);
    });

    await t.test('"Try it out" lists it with the example parameters: 200', async () => {
      const shown = await tryItOut(await openOperation(page, 'findPlants'));
      assert.match(shown.url, new RegExp(`^${origin}/plants\\?limit=10&cursor=\\w+&tag=tropical$`));
      assert.equal(shown.status, '200', shown.body);
      assert.deepEqual(JSON.parse(shown.body), [{ name: 'Monstera', tag: 'tropical' }]);
    });

    await t.test('"Try it out" deletes it by the example id: 204, and the store is empty', async () => {
      const shown = await tryItOut(await openOperation(page, 'deletePlant'));
      assert.equal(shown.url, `${origin}/plants/42`);
      assert.equal(shown.status, '204', shown.body);
      assert.deepEqual(await stored(), []);
    });

    await t.test('"Try it out" on the change feed shows its first seconds instead of waiting forever', async () => {
      const shown = await tryItOut(await openOperation(page, 'streamEvents'));
      assert.equal(shown.status, '200', shown.body);
      // The examples (Last-Event-ID and ?after= 0) replay every event kept: the plant's creation and deletion.
      assert.match(
        shown.body,
        /^: connected\nretry: \d{4}\n\nid: 1\nevent: plant.created\ndata: \{"id":42,"name":"Monstera","tag":"tropical"\}\n\nid: 2\nevent: plant.deleted\ndata: \{"id":42\}\n\n$/,
      );
    });
  } finally {
    // Also when the page did not render: that is when the picture helps most.
    await mkdir(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    t.diagnostic(`screenshot of /docs: ${SCREENSHOT}`);
  }

  await t.test('every request the page made went to the server itself', () => {
    assert.ok(requests.length >= 5, `the page loaded its document, scripts and styles: ${requests.join(', ')}`);
    assert.deepEqual(elsewhere, [], `requests off the machine (blocked): ${elsewhere.join(', ')}`);
    assert.ok(
      requests.some((request) => request.endsWith('/docs/json')),
      `the page read the OpenAPI document: ${requests.join(', ')}`,
    );
  });

  await t.test('no request failed or answered 4xx/5xx, and the page logged no error', () => {
    // Except the change feed, which the page itself closes after its first seconds (the example's
    // query: after, types and limit).
    const isFeed = (request: string): boolean =>
      request.startsWith(`${origin}/events?after=0&`) && request.endsWith(': net::ERR_ABORTED');
    assert.equal(failed.filter(isFeed).length, 1, failed.join(', '));
    assert.deepEqual(
      failed.filter((request) => !isFeed(request)),
      [],
    );
    assert.deepEqual(errorStatuses, []);
    assert.deepEqual(consoleErrors, []);
  });
});
