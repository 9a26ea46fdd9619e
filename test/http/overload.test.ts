import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { READ_WRITE, makeApp } from '../helpers.js';
import { eventually } from '../support/eventually.js';
import { sample } from '../support/scrape.js';
import { assertErrorBody } from './support.js';

// Overload protection (src/http/overload.ts): while the event loop lags behind, API requests are
// answered 503 with Retry-After at once, instead of joining a queue whose latency has no bound.

/** Keeps this process's event loop busy for `ms`, as a flood of work would. */
function busy(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

/** Until a request is answered 200: the loop has been calm for a few samples (polled, at most 15 s). */
async function calm(request: () => Promise<{ statusCode: number }>): Promise<number> {
  let status = 0;
  await eventually(
    async () => ((status = (await request()).statusCode) === 200 ? true : undefined),
    () => `a 200 once the loop is calm (last ${status})`,
    15_000,
  );
  return status;
}

test('a lagging event loop gets 503 with Retry-After and the Error body; the service recovers', async (t) => {
  const h = await makeApp({ maxEventLoopDelayMs: 20, pressureSampleMs: 50 });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const list = () => h.call(token, { method: 'GET', url: '/plants' });
  // Calm first: on a busy machine the start of a test process can itself lag the loop.
  assert.equal(await calm(list), 200);

  // Sustained lag: 200 ms blocked out of every few, a request after each block.
  const statuses: number[] = [];
  for (let i = 0; i < 20 && !statuses.includes(503); i++) {
    busy(200);
    await sleep(1);
    const response = await list();
    statuses.push(response.statusCode);
    if (response.statusCode === 503) {
      assertErrorBody(response, 503);
      assert.equal(response.headers['retry-after'], '1');
      assert.equal(response.headers['cache-control'], 'no-store');
    }
  }
  assert.ok(statuses.includes(503), `a 503 while overloaded, got ${statuses.join(', ')}`);
  assert.ok(
    statuses.every((s) => s === 200 || s === 503),
    `only 200 or 503, got ${statuses.join(', ')}`,
  );

  // The lag is over: within a few samples the answers are 200 again.
  assert.equal(await calm(list), 200);
});

test('health and readiness are not refused while overloaded: they are how an operator sees it', async (t) => {
  const h = await makeApp({ maxEventLoopDelayMs: 20, pressureSampleMs: 50 });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  let refused = false;
  for (let i = 0; i < 20 && !refused; i++) {
    busy(200);
    await sleep(1);
    refused = (await h.call(token, { method: 'GET', url: '/plants' })).statusCode === 503;
    if (refused) assert.equal((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
  }
  assert.ok(refused, 'the API was refused under lag');
});

test('MAX_EVENT_LOOP_DELAY=off never refuses', async (t) => {
  const h = await makeApp({ maxEventLoopDelayMs: 0, pressureSampleMs: 50 });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (let i = 0; i < 5; i++) {
    busy(200);
    await sleep(1);
    assert.equal((await h.call(token, { method: 'GET', url: '/plants' })).statusCode, 200);
  }
});

test('each request the guard refuses is counted in plant_store_overload_refusals_total', async (t) => {
  const h = await makeApp({ maxEventLoopDelayMs: 20, pressureSampleMs: 50 });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const refusals = async (): Promise<number | undefined> =>
    sample((await h.app.inject({ method: 'GET', url: '/metrics' })).payload, 'plant_store_overload_refusals_total');
  const list = () => h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(await calm(list), 200);
  // calm() may itself have met refusals on a busy machine: they count, so the test counts from here.
  const before = await refusals();
  assert.ok(before !== undefined, 'the series is there from the start');

  let refused = 0;
  for (let i = 0; i < 20 && refused < 2; i++) {
    busy(200);
    await sleep(1);
    if ((await list()).statusCode === 503) refused += 1;
  }
  assert.ok(refused > 0, 'the API was refused under lag');
  assert.equal(await refusals(), before + refused);
});
