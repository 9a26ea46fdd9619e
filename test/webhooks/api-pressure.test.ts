import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ApiPressure, loopBusySince } from '../../src/webhooks/api-pressure.js';

// The dispatcher yields to the API only when both hold over a window (100 ms): the event loop was
// busy and requests arrived fast. Busy windows are made by spinning; idle ones by sleeping; the
// busy share is this process's own (event-loop utilization), while the windows are measured on a
// clock the test moves by the time each step stands for: a loaded machine that stretches a spin
// or a sleep changes neither the rate of requests nor which reads share a window.

const spin = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

/** An ApiPressure on this event loop's busy share, its windows on a clock moved by `pass(ms)`. */
function measured() {
  let at = 0;
  let requests = 0;
  const pressure = new ApiPressure(
    () => requests,
    loopBusySince(),
    () => at,
  );
  return {
    pressure,
    arrive: (n: number) => void (requests += n),
    pass: (ms: number) => void (at += ms),
  };
}

test('a busy loop with many requests is pressure; an idle loop, or a busy one without requests, is not', async () => {
  const { pressure, arrive, pass } = measured();

  spin(150);
  pass(150);
  arrive(1000); // 1,000 in 150 ms: far above 2,000/s
  assert.equal(pressure.saturated, true, 'busy loop, many requests');

  spin(150);
  pass(150);
  arrive(10); // a busy loop (a backlog drained by the dispatcher alone, fsyncs) at a modest rate
  assert.equal(pressure.saturated, false, 'busy loop, few requests');

  // Idle for 600 ms (a long window, so that what else this process does meanwhile on a loaded
  // machine, a garbage collection, the test runner's output, stays far under 75 % of it: a 150 ms
  // window once read over 75 % in CI), at 5,000 requests/s.
  await sleep(600);
  pass(600);
  arrive(3000);
  assert.equal(pressure.saturated, false, 'idle loop, many requests');
});

test('the answer holds within a window and is measured again after it', async () => {
  const { pressure, arrive, pass } = measured();
  spin(120);
  pass(120);
  arrive(1000);
  assert.equal(pressure.saturated, true);
  await sleep(20); // read again within the window: the same answer, though the loop was idle since
  pass(20);
  assert.equal(pressure.saturated, true);
  spin(120); // a new window with no new request
  pass(120);
  assert.equal(pressure.saturated, false);
});

/** An ApiPressure read through given readings: each window is 100 ms, `busy` of it busy, with `rate` requests/s. */
function scripted() {
  let at = 0;
  let requests = 0;
  let busy = 0;
  const pressure = new ApiPressure(
    () => requests,
    () => busy,
    () => at,
  );
  return (share: number, rate: number): boolean => {
    at += 100;
    requests += rate / 10;
    busy = share;
    return pressure.saturated;
  };
}

test('once saturated, windows 50 to 75 % busy keep it so, up to 3 in a row; from rest, such a window is not pressure', () => {
  const window = scripted();
  assert.equal(window(0.8, 5000), true, 'over 75 % busy, 5,000 requests/s');
  for (let i = 1; i <= 3; i++) assert.equal(window(0.6, 5000), true, `dip ${i} within the burst does not end it`);
  assert.equal(window(0.6, 5000), false, 'a fourth in a row does: a steady load, not a burst');
  assert.equal(window(0.6, 5000), false, 'nor does it start again at 60 %');

  assert.equal(window(0.8, 5000), true, 'busy again');
  assert.equal(window(0.6, 5000), true);
  assert.equal(window(0.9, 5000), true);
  for (let i = 1; i <= 3; i++)
    assert.equal(window(0.7, 5000), true, 'the count of dips starts again after a busy window');
  assert.equal(window(0.4, 5000), false, 'under 50 %: ended at once');

  assert.equal(window(0.8, 5000), true);
  assert.equal(window(0.6, 1500), false, 'requests slower than 2,000/s: ended at once');
  assert.equal(window(0.74, 5000), false, 'from rest, 74 % is not pressure');
});
