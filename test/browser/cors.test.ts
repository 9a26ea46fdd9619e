import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli, startServer } from '../process.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, launchLocalOnly, skip } from './chromium.js';
import { cleanupsInReverse } from '../support/cleanups.js';

// CORS_ORIGINS in a real browser: a page from another origin (the same host, another
// port) uses the API with fetch; a page from an origin not on the list is refused by the browser.
// Every connection stays on 127.0.0.1.

// The browser app, plain JavaScript that the page loads: each call answers what its script could
// read. (Functions handed to page.evaluate would be rewritten by tsx with helpers the page lacks.)
const APP_SCRIPT = String.raw`
const nextPage = (response, api) => {
  const target = /^<([^>]+)>; rel="next"$/.exec(response.headers.get('link') ?? '');
  return target ? new URL(target[1], api).href : undefined;
};
const refusal = async (response) => ({
  status: response.status,
  body: await response.json(),
  requestId: response.headers.get('x-request-id'),
  challenge: response.headers.get('www-authenticate'),
  retryAfter: response.headers.get('retry-after'),
});
const attempt = async (run) => {
  try {
    return 'answered ' + (await run()).status;
  } catch (error) {
    return 'refused: ' + error.name;
  }
};
window.plantsApp = {
  async createListDelete(api, token) {
    const auth = { authorization: 'Bearer ' + token };
    const created = [];
    // Written as text: 9007199254740993 is beyond what a JS number holds exactly.
    for (const body of [
      '{"id":9007199254740993,"name":"Monstera","tag":"tropical"}',
      '{"id":-5,"name":"Fern"}',
      '{"id":3,"name":"Cactus"}',
    ]) {
      const response = await fetch(api + '/plants', {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body,
      });
      created.push([response.status, await response.json()]);
    }
    const pages = [];
    const links = [];
    let next = api + '/plants?limit=2';
    let remaining = null;
    let requestId = null;
    while (next !== undefined) {
      const response = await fetch(next, { headers: auth });
      pages.push(await response.json());
      remaining = response.headers.get('ratelimit-remaining');
      requestId = response.headers.get('x-request-id');
      if (response.headers.has('link')) links.push(response.headers.get('link'));
      next = nextPage(response, api);
    }
    const deleted = await fetch(api + '/plants/9007199254740993', { method: 'DELETE', headers: auth });
    const after = await fetch(api + '/plants', { headers: auth });
    return { created, pages, links, remaining, requestId, deleted: deleted.status, after: await after.json() };
  },
  async refusals(api, token) {
    const headers = { authorization: 'Bearer ' + token, 'x-request-id': 'browser-app-42' };
    const missing = await refusal(await fetch(api + '/plants/424242', { method: 'DELETE', headers }));
    const badUrl = await refusal(await fetch(api + '/plants/%FF', { method: 'DELETE', headers }));
    const unauthenticated = await refusal(await fetch(api + '/plants'));
    const limited = [];
    for (let i = 0; i < 12 && limited.length === 0; i++) {
      const response = await fetch(api + '/plants', { headers });
      if (response.status === 429) limited.push(await refusal(response));
      else await response.arrayBuffer();
    }
    return { missing, badUrl, unauthenticated, limited };
  },
  async intrude(api, token) {
    const auth = { authorization: 'Bearer ' + token };
    return {
      create: await attempt(() =>
        fetch(api + '/plants', {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: '{"id":77,"name":"Intruder"}',
        }),
      ),
      list: await attempt(() => fetch(api + '/plants', { headers: auth })),
      // No preflight for this one: the browser sends it, then withholds the answer.
      health: await attempt(() => fetch(api + '/healthz')),
    };
  },
};
`;

interface Refusal {
  readonly status: number;
  readonly body: { error: number; message: string };
  readonly requestId: string | null;
  readonly challenge: string | null;
  readonly retryAfter: string | null;
}

interface PlantsApp {
  createListDelete(
    api: string,
    token: string,
  ): Promise<{
    created: unknown[];
    pages: unknown[];
    links: string[];
    remaining: string | null;
    requestId: string | null;
    deleted: number;
    after: unknown;
  }>;
  refusals(
    api: string,
    token: string,
  ): Promise<{ missing: Refusal; badUrl: Refusal; unauthenticated: Refusal; limited: Refusal[] }>;
  intrude(api: string, token: string): Promise<Record<string, string>>;
}

/** A server on 127.0.0.1 (a port of its own, so an origin of its own) serving the browser app. */
async function pageServer(): Promise<{ server: Server; origin: string }> {
  const server = createServer((request, response) => {
    if (request.url === '/app.js') {
      response.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
      return void response.end(APP_SCRIPT);
    }
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end('<!doctype html><title>a browser app</title><script src="/app.js"></script>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function token(env: NodeJS.ProcessEnv, subject: string): Promise<string> {
  const r = await runCli(
    ['token', 'create', '--subject', subject, '--scopes', 'plants:read,plants:write', '--json'],
    env,
  );
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { token: string }).token;
}

test(
  'a browser app on an allowed origin uses the API; one on another origin is refused',
  {
    timeout: BROWSER_TEST_TIMEOUT_MS,
    skip,
  },
  async (t) => {
    assert.ok(existsSync(CHROMIUM), MISSING);
    // Undone in reverse order: the browser, the server, the page servers, then the database.
    const cleanups = cleanupsInReverse(t);
    const dir = await mkdtemp(join(tmpdir(), 'plant-store-cors-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const allowed = await pageServer();
    cleanups.push(() => new Promise((resolve) => allowed.server.close(resolve)));
    const refused = await pageServer();
    cleanups.push(() => new Promise((resolve) => refused.server.close(resolve)));
    const env = {
      DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}`,
      CORS_ORIGINS: allowed.origin,
      RATE_LIMIT: '10/1m',
    };
    const server = await startServer(env);
    cleanups.push(() => server.stop());
    const api = server.url;
    const alice = await token(env, 'alice');
    const bob = await token(env, 'bob');

    const browser = await launchLocalOnly();
    cleanups.push(() => browser.close());
    const context = await browser.newContext();
    // Observed, not intercepted: with page.route or context.route, Playwright answers CORS preflights
    // itself, and the server's own answer would never be tested.
    const elsewhere: string[] = [];
    context.on('request', (request) => {
      if (new URL(request.url()).hostname !== '127.0.0.1') elsewhere.push(request.url());
    });
    const page = await context.newPage();
    page.setDefaultTimeout(PATIENCE_MS);
    assert.equal((await page.goto(`${allowed.origin}/`))?.status(), 200);
    await page.waitForFunction(() => 'plantsApp' in globalThis);

    await t.test('it creates plants, lists them page by page through Link, and deletes one', async () => {
      const result = await page.evaluate(
        ({ api, token }) => (globalThis as unknown as { plantsApp: PlantsApp }).plantsApp.createListDelete(api, token),
        { api, token: alice },
      );
      assert.deepEqual(result.created, [
        [200, { name: 'Monstera', tag: 'tropical' }],
        [200, { name: 'Fern' }],
        [200, { name: 'Cactus' }],
      ]);
      assert.deepEqual(result.pages, [[{ name: 'Fern' }, { name: 'Cactus' }], [{ name: 'Monstera', tag: 'tropical' }]]);
      assert.equal(result.links.length, 1, 'the script read one Link header');
      assert.match(result.links[0]!, /^<\/plants\?[^>]*cursor=[^>]*>; rel="next"$/);
      assert.match(String(result.remaining), /^\d+$/, 'the script read RateLimit-Remaining');
      assert.match(String(result.requestId), /^[0-9a-f-]{36}$/, 'the script read X-Request-Id');
      assert.equal(result.deleted, 204);
      assert.deepEqual(result.after, [{ name: 'Fern' }, { name: 'Cactus' }]);
    });

    await t.test('it reads the Error body, X-Request-Id, WWW-Authenticate and Retry-After of refusals', async () => {
      const result = await page.evaluate(
        ({ api, token }) => (globalThis as unknown as { plantsApp: PlantsApp }).plantsApp.refusals(api, token),
        { api, token: bob },
      );
      assert.equal(result.missing.status, 404);
      assert.deepEqual(Object.keys(result.missing.body).sort(), ['error', 'message']);
      assert.equal(result.missing.body.error, 404);
      assert.equal(result.missing.requestId, 'browser-app-42', 'the X-Request-Id the app sent, echoed');
      assert.equal(result.badUrl.status, 400, 'a URL with bad percent-encoding, refused below the routes');
      assert.equal(result.badUrl.body.error, 400);
      assert.equal(result.badUrl.requestId, 'browser-app-42');
      assert.equal(result.unauthenticated.status, 401);
      assert.equal(result.unauthenticated.body.error, 401);
      assert.equal(result.unauthenticated.challenge, 'Bearer realm="plant-store"');
      assert.match(String(result.unauthenticated.requestId), /^[0-9a-f-]{36}$/);
      assert.equal(result.limited.length, 1, 'the rate limit answered 429');
      assert.equal(result.limited[0]!.body.error, 429);
      assert.match(String(result.limited[0]!.retryAfter), /^\d+$/);
    });

    await t.test('a page on an origin not on the list is refused by the browser, and creates nothing', async () => {
      const other = await context.newPage();
      assert.equal((await other.goto(`${refused.origin}/`))?.status(), 200);
      await other.waitForFunction(() => 'plantsApp' in globalThis);
      const outcome = await other.evaluate(
        ({ api, token }) => (globalThis as unknown as { plantsApp: PlantsApp }).plantsApp.intrude(api, token),
        { api, token: alice },
      );
      assert.deepEqual(outcome, {
        create: 'refused: TypeError',
        list: 'refused: TypeError',
        health: 'refused: TypeError',
      });
      await other.close();
      const listed = await fetch(`${api}/plants`, { headers: { authorization: `Bearer ${alice}` } });
      assert.deepEqual(await listed.json(), [{ name: 'Fern' }, { name: 'Cactus' }], 'the refused create never ran');
    });

    await t.test('no request left 127.0.0.1', () => {
      assert.deepEqual(elsewhere, []);
    });
  },
);
