import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ApiPressure } from '../../src/webhooks/api-pressure.js';

// The dispatcher yields to the API only when both hold over a window (100 ms): the event loop was
// busy and requests arrived fast. Busy windows are made by spinning; idle ones by sleeping.

const spin = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

test('a busy loop with many requests is pressure; an idle loop, or a busy one without requests, is not', async () => {
  let requests = 0;
  const pressure = new ApiPressure(() => requests);

  spin(150);
  requests += 1000; // 1,000 in 150 ms: far above 2,000/s
  assert.equal(pressure.saturated, true, 'busy loop, many requests');

  spin(150);
  requests += 10; // a busy loop (a backlog drained by the dispatcher alone, fsyncs) at a modest rate
  assert.equal(pressure.saturated, false, 'busy loop, few requests');

  await sleep(150);
  requests += 1000;
  assert.equal(pressure.saturated, false, 'idle loop, many requests');
});

test('the answer holds within a window and is measured again after it', async () => {
  let requests = 0;
  const pressure = new ApiPressure(() => requests);
  spin(120);
  requests += 1000;
  assert.equal(pressure.saturated, true);
  await sleep(20); // read again within the window: the same answer, though the loop was idle since
  assert.equal(pressure.saturated, true);
  spin(120); // a new window with no new request
  assert.equal(pressure.saturated, false);
});

test('once saturated, a window with the loop 50 to 75 % busy keeps it so; from rest, such a window is not pressure', async () => {
  let requests = 0;
  const pressure = new ApiPressure(() => requests);
  spin(150);
  requests += 1000;
  assert.equal(pressure.saturated, true);

  spin(100); // about 70 % busy over the window (the sleep can only make it longer, never shorter)
  await sleep(40);
  requests += 1000;
  assert.equal(pressure.saturated, true, 'a dip within the burst does not end it');

  await sleep(150);
  requests += 10;
  assert.equal(pressure.saturated, false, 'the burst ended');

  spin(100);
  await sleep(40);
  requests += 1000;
  assert.equal(pressure.saturated, false, 'the same window from rest does not start it');
});
