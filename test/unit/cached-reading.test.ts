import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CachedReading } from '../../src/system/cached-reading.js';

// The database gauges' reading (system/event-series.ts): at most one read per interval of the
// app's clock, shared by concurrent scrapes, the last value kept through a failure said once.

function harness(read: () => Promise<number>, waitMs = 1000) {
  let now = 0;
  const said: string[] = [];
  let reads = 0;
  const reading = new CachedReading(
    () => {
      reads += 1;
      return read();
    },
    5000,
    waitMs,
    () => now,
    { failed: (error) => said.push(`failed: ${(error as Error).message}`), recovered: () => said.push('recovered') },
  );
  return { reading, said, reads: () => reads, advance: (ms: number) => void (now += ms) };
}

test('reads once per interval, however many scrapes come, and concurrent scrapes share the read', async () => {
  let value = 1;
  const h = harness(() => Promise.resolve(value));
  assert.deepEqual(await Promise.all([h.reading.get(), h.reading.get(), h.reading.get()]), [1, 1, 1]);
  assert.equal(h.reads(), 1);
  value = 2;
  h.advance(4999);
  assert.equal(await h.reading.get(), 1, 'within the interval: the last value, no read');
  assert.equal(h.reads(), 1);
  h.advance(1);
  assert.equal(await h.reading.get(), 2);
  assert.equal(h.reads(), 2);
  h.advance(-60_000); // the clock stepped back: read again rather than wait a minute
  assert.equal(await h.reading.get(), 2);
  assert.equal(h.reads(), 3);
});

test('a failing read keeps the last value, is said once, is not retried within the interval, and its end is said', async () => {
  let fail = false;
  const h = harness(() => (fail ? Promise.reject(new Error('database away')) : Promise.resolve(7)));
  assert.equal(await h.reading.get(), 7);
  fail = true;
  for (let i = 0; i < 3; i++) {
    h.advance(5000);
    assert.equal(await h.reading.get(), 7, 'the last value stays');
    assert.equal(await h.reading.get(), 7);
  }
  assert.equal(h.reads(), 4, 'one read per interval, failures included');
  assert.deepEqual(h.said, ['failed: database away']);
  fail = false;
  h.advance(5000);
  assert.equal(await h.reading.get(), 7);
  assert.deepEqual(h.said, ['failed: database away', 'recovered']);
});

test('undefined until a read succeeds', async () => {
  const h = harness(() => Promise.reject(new Error('no database')));
  assert.equal(await h.reading.get(), undefined);
  assert.deepEqual(h.said, ['failed: no database']);
});

test('a scrape waits for a slow read at most waitMs, then answers with the last value; the read still lands', async () => {
  let release: (value: number) => void = () => {};
  let slow = false;
  const h = harness(() => (slow ? new Promise<number>((resolve) => (release = resolve)) : Promise.resolve(1)), 20);
  assert.equal(await h.reading.get(), 1);
  slow = true;
  h.advance(5000);
  assert.equal(await h.reading.get(), 1, 'the read hangs: the scrape answers with the last value');
  assert.equal(await h.reading.get(), 1, 'a scrape meanwhile starts no second read');
  assert.equal(h.reads(), 2);
  release(3);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(await h.reading.get(), 3, 'its value serves the next scrape');
  assert.equal(h.reads(), 2);
});
