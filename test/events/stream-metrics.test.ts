import assert from 'node:assert/strict';
import { type ClientRequest, type IncomingMessage, request } from 'node:http';
import { test } from 'node:test';
import { READ_WRITE, type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import { sample } from '../support/scrape.js';
import { eventually } from './stream-support.js';

// plant_store_event_streams (interface 1.2.0; docs/api.md#health-documentation-and-metrics): the
// change-feed streams open in this process, over real sockets on 127.0.0.1. Waits are deadlines on
// a condition.

/** Opens GET /events and resolves once the stream's first line (`: connected`) has arrived. */
function openStream(port: number, token: string): Promise<{ req: ClientRequest; res: IncomingMessage }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      path: '/events',
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      assert.equal(res.statusCode, 200);
      res.setEncoding('utf8');
      res.once('data', () => resolve({ req, res }));
    });
    req.end();
  });
}

async function streams(h: TestApp): Promise<number | undefined> {
  const response = await h.app.inject({ method: 'GET', url: '/metrics' });
  assert.equal(response.statusCode, 200);
  return sample(response.body, 'plant_store_event_streams');
}

const until = (h: TestApp, expected: number): Promise<void> =>
  eventually(`plant_store_event_streams at ${expected}`, async () => (await streams(h)) === expected);

test('plant_store_event_streams counts the streams open now: 2, then 1 when a client leaves, then 0', async (t) => {
  const h = await makeApp();
  const port = await listen(h);
  const token = await h.token('alice', READ_WRITE);
  const opened: ClientRequest[] = [];
  t.after(async () => {
    for (const req of opened) req.destroy();
    await h.close();
  });
  assert.equal(await streams(h), 0);
  const first = await openStream(port, token);
  const second = await openStream(port, token);
  opened.push(first.req, second.req);
  assert.equal(await streams(h), 2);
  first.req.destroy();
  await until(h, 1);
  second.req.destroy();
  await until(h, 0);
});
