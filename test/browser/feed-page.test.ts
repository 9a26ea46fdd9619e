import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, callServer, runCli, startServer } from '../process.js';
import { cleanupsInReverse } from '../support/cleanups.js';
import { freePort } from '../support/postgres.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, launchLocalOnly, skip } from './chromium.js';

// docs/events.md, "Following the feed from a browser" (interface 1.3.0), as printed: the page's
// block served to Chromium from another origin (CORS_ORIGINS names it), with the API's address
// and the token's place changed. The browser's own EventSource opens the stream with a ticket;
// the server is restarted under it, and the page reopens the stream with a fresh ticket and
// `?after=`: every event shown once, in order. No ticket reaches the server's log.

const DOC = readFileSync(fileURLToPath(new URL('../../docs/events.md', import.meta.url)), 'utf8');
const PAGE = /<!-- feed: page -->\n+```html\n([\s\S]*?)\n```/.exec(DOC)?.[1];

async function pageServer(html: () => string): Promise<{ server: Server; origin: string }> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    response.end(`<!doctype html><title>the feed</title>\n${html()}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

test(
  'the page of docs/events.md follows the feed with tickets in Chromium, across a restart of the server',
  { timeout: BROWSER_TEST_TIMEOUT_MS, skip },
  async (t) => {
    assert.ok(existsSync(CHROMIUM), MISSING);
    assert.ok(PAGE, 'docs/events.md marks the page with <!-- feed: page -->');
    const api = "const api = 'http://127.0.0.1:8080';";
    const held = "const token = sessionStorage.getItem('plant-store-token'); // however the page holds it";
    assert.ok(PAGE.includes(api) && PAGE.includes(held), 'the page names the API and where the token is');

    const cleanups = cleanupsInReverse(t);
    const dir = await mkdtemp(join(tmpdir(), 'plant-store-feed-page-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    let html = '';
    const page = await pageServer(() => html);
    cleanups.push(() => new Promise((resolve) => page.server.close(resolve)));
    const port = await freePort();
    const env = {
      DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}`,
      CORS_ORIGINS: page.origin,
      PORT: String(port),
    };
    let server: ServerProcess = await startServer(env);
    let logs = '';
    cleanups.push(() => server.stop());
    const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'], env);
    assert.equal(minted.code, 0, minted.stderr);
    const token = minted.stdout.trim();
    html = PAGE.replace(api, `const api = '${server.url}';`).replace(held, `const token = '${token}';`);

    const browser = await launchLocalOnly();
    cleanups.push(() => browser.close());
    const context = await browser.newContext();
    const elsewhere: string[] = [];
    context.on('request', (request) => {
      if (new URL(request.url()).hostname !== '127.0.0.1') elsewhere.push(request.url());
    });
    const tab = await context.newPage();
    tab.setDefaultTimeout(PATIENCE_MS);
    const errors: string[] = [];
    tab.on('pageerror', (error) => errors.push(error.message));
    assert.equal((await tab.goto(`${page.origin}/`))?.status(), 200);

    const create = async (body: string): Promise<void> => {
      const answer = await callServer(server, token, 'POST', '/plants', body);
      assert.equal(answer.status, 200, answer.text);
    };
    const shown = async (count: number): Promise<string[]> => {
      await tab
        .locator('#events li')
        .nth(count - 1)
        .waitFor();
      return tab.locator('#events li').allTextContents();
    };
    // The stream is open once the server counts it (the feed starts from now: nothing before it).
    const streamOpen = async (): Promise<void> => {
      for (;;) {
        const metrics = await (await fetch(`${server.url}/metrics`)).text();
        if (/^plant_store_event_streams(?:\{[^}]*\})? 1$/m.test(metrics)) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    await streamOpen();
    await create('{"id": 1, "name": "Monstera", "tag": "tropical"}');
    assert.deepEqual(await shown(1), ['1 plant.created {"id":1,"name":"Monstera","tag":"tropical"}']);

    // A restart on the same port: the stream ends, the page's reconnects fail while no server
    // listens, then a fresh ticket and ?after=1 resume it.
    assert.equal(await server.stop(), 0);
    logs += server.logs();
    server = await startServer(env);
    await create('{"id": 2, "name": "Fern"}');
    await streamOpen();
    assert.equal((await callServer(server, token, 'DELETE', '/plants/1')).status, 204);
    assert.deepEqual(await shown(3), [
      '1 plant.created {"id":1,"name":"Monstera","tag":"tropical"}',
      '2 plant.created {"id":2,"name":"Fern"}',
      '3 plant.deleted {"id":1}',
    ]);
    logs += server.logs();

    // Each stream spent a ticket of its own; no ticket was refused, and none is in the log.
    const lines = logs.split('\n').filter((line) => line.includes('"msg":"request completed"'));
    const tickets = lines.filter((line) => line.includes('"url":"/events/tickets"'));
    const streams = lines.filter((line) => line.includes('"url":"/events?ticket='));
    assert.ok(tickets.length >= 2, `tickets asked: ${tickets.length}`);
    assert.ok(
      streams.every((line) => line.includes('"url":"/events?ticket=[redacted]')),
      streams.join('\n'),
    );
    assert.ok(!/"status":401/.test(lines.join('\n')), 'no request was refused');
    assert.doesNotMatch(logs, /pse_[\w-]{10}/, 'no ticket in the log');
    assert.deepEqual(errors, []);
    assert.deepEqual(elsewhere, []);
  },
);
