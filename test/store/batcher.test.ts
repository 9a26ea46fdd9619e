import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { Batcher, Coalescer, TurnBatch } from '../../src/store/batcher.js';

type Outcome = Error | ReadonlyArray<string | Promise<string>>;

/**
 * A batcher whose batches finish only when the test says so: each item answered in upper case,
 * or the batch failing with an Error, or the outputs given.
 */
function controlled(slots: number, maxBatch = 100, maxWaitMs = 60_000) {
  const batches: Array<{ items: readonly string[]; finish: (outcome?: Outcome) => void }> = [];
  const batcher = new Batcher<string, string>(
    slots,
    maxBatch,
    (items) => {
      return new Promise((resolve, reject) => {
        batches.push({
          items,
          finish: (outcome) =>
            outcome instanceof Error ? reject(outcome) : resolve(outcome ?? items.map((item) => item.toUpperCase())),
        });
      });
    },
    maxWaitMs,
    (sent) => new Error(sent ? 'no answer in time: outcome unknown' : 'waited too long'),
  );
  return { batcher, batches };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('Batcher starts an item at once, alone, while a slot is free', async () => {
  const { batcher, batches } = controlled(2);
  const a = batcher.submit('a');
  const b = batcher.submit('b');
  assert.deepEqual(
    batches.map((batch) => batch.items),
    [['a'], ['b']],
  );
  batches[0]!.finish();
  batches[1]!.finish();
  assert.deepEqual(await Promise.all([a, b]), ['A', 'B']);
});

test('Batcher runs what waited for a busy slot as one batch, and nothing that came after it started', async () => {
  const { batcher, batches } = controlled(1);
  const first = batcher.submit('a');
  const waited = ['b', 'c', 'd'].map((item) => batcher.submit(item));
  assert.equal(batches.length, 1, 'b, c and d wait while the only slot is busy');
  batches[0]!.finish();
  await first;
  await turn();
  assert.deepEqual(batches[1]!.items, ['b', 'c', 'd']);
  const late = batcher.submit('e'); // the batch of b, c and d has started: e waits for the next
  batches[1]!.finish();
  assert.deepEqual(await Promise.all(waited), ['B', 'C', 'D']);
  await turn();
  assert.deepEqual(batches[2]!.items, ['e']);
  batches[2]!.finish();
  assert.equal(await late, 'E');
});

test('Batcher never puts more than maxBatch items in a batch', async () => {
  const { batcher, batches } = controlled(1, 2);
  const all = ['a', 'b', 'c', 'd', 'e'].map((item) => batcher.submit(item));
  for (let i = 0; i < 3; i++) {
    batches[i]!.finish();
    await turn();
  }
  assert.deepEqual(
    batches.map((batch) => batch.items),
    [['a'], ['b', 'c'], ['d', 'e']],
  );
  assert.deepEqual(await Promise.all(all), ['A', 'B', 'C', 'D', 'E']);
});

test('a failed batch fails each of its items and frees its slot for the next', async () => {
  const { batcher, batches } = controlled(1);
  const first = batcher.submit('a');
  const second = batcher.submit('b');
  const third = batcher.submit('c');
  batches[0]!.finish(new Error('connection lost'));
  await assert.rejects(first, /connection lost/);
  await turn();
  batches[1]!.finish(new Error('still lost'));
  await assert.rejects(second, /still lost/);
  await assert.rejects(third, /still lost/);
  const fourth = batcher.submit('d');
  batches[2]!.finish();
  assert.equal(await fourth, 'D');
});

test('an item that waits too long for a slot fails, and the batcher goes on once the slot frees', async () => {
  const { batcher, batches } = controlled(1, 100, 30);
  // Its work does not end in time (a database that stopped answering): it fails too, outcome unknown.
  const stuck = batcher.submit('a').then(
    (value) => `answered ${value}`,
    (error: Error) => error.message,
  );
  const waiting = ['b', 'c'].map((item) => assert.rejects(batcher.submit(item), /waited too long/));
  await Promise.all(waiting);
  assert.equal(batches.length, 1, 'nothing that timed out was run');
  batches[0]!.finish(); // too late: a was answered at its deadline
  assert.equal(await stuck, 'no answer in time: outcome unknown');
  const next = batcher.submit('d');
  await turn();
  batches[1]!.finish();
  assert.equal(await next, 'D');
});

/**
 * Mocked time: setTimeout, Date and performance.now move only when the test ticks.
 * `advanceTo` ticks a millisecond at a time and lets promises settle after each, so an item's
 * failure is recorded at the very millisecond its timer fired.
 */
function mockedTime(t: TestContext) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  t.mock.method(performance, 'now', () => Date.now());
  const start = Date.now();
  /** Each watched item's answer, and when it came (ms after the start). */
  const answers = new Map<string, { at: number; value?: string; error?: string }>();
  return {
    answers,
    failedAt: (item: string): number | undefined => (answers.get(item)?.error ? answers.get(item)!.at : undefined),
    watch: (item: string, answer: Promise<string>): void => {
      answer.then(
        (value) => answers.set(item, { at: Date.now() - start, value }),
        (error: Error) => answers.set(item, { at: Date.now() - start, error: error.message }),
      );
    },
    advanceTo: async (ms: number): Promise<void> => {
      while (Date.now() - start < ms) {
        t.mock.timers.tick(1);
        await turn();
      }
    },
  };
}

test('each waiting item fails at its own deadline, not at a check armed for an earlier item', async (t) => {
  const time = mockedTime(t);
  const { batcher, batches } = controlled(1, 100, 3000);
  time.watch('a', batcher.submit('a')); // holds the only slot
  time.watch('b', batcher.submit('b'));
  await time.advanceTo(1000);
  time.watch('c', batcher.submit('c'));
  await time.advanceTo(2500);
  time.watch('d', batcher.submit('d'));
  await time.advanceTo(7000);
  assert.deepEqual(
    ['b', 'c', 'd'].map((item) => time.failedAt(item)),
    [3000, 4000, 5500],
    'each one 3 s after it came',
  );
  assert.equal(batches.length, 1, 'nothing that timed out was run');
});

test('an item answered with a rejected promise fails alone; the rest of its batch succeeds', async () => {
  const batcher = new Batcher<number, number>(
    1,
    10,
    (items) => Promise.resolve(items.map((n) => (n < 0 ? Promise.reject(new Error(`bad ${n}`)) : n * 2))),
    60_000,
    () => new Error('waited too long'),
  );
  const results = await Promise.allSettled([1, -1, 3].map((n) => batcher.submit(n)));
  assert.deepEqual(
    results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message)),
    [2, 'bad -1', 6],
  );
});

/** Queries that end only when the test says so; each answers its own number. */
function queries() {
  const started: Array<{ key: string; end: (fail?: Error) => void }> = [];
  const query = (key: string) => () =>
    new Promise<string>((resolve, reject) => {
      const n = started.length + 1;
      started.push({ key, end: (fail) => (fail ? reject(fail) : resolve(`${key}#${n}`)) });
    });
  return { started, query };
}

test('Coalescer: reads that arrive while a query runs share the next query, started when it ends', async () => {
  const reads = new Coalescer<string>();
  const { started, query } = queries();
  const first = reads.read('p', query('p'));
  const during = [reads.read('p', query('p')), reads.read('p', query('p'))];
  assert.equal(started.length, 1, 'no second query while the first runs');
  started[0]!.end();
  assert.equal(await first, 'p#1');
  await turn();
  assert.equal(started.length, 2, 'the reads that came during the first query get a query of their own');
  const late = reads.read('p', query('p')); // arrives while the second runs: waits for a third
  started[1]!.end();
  assert.deepEqual(await Promise.all(during), ['p#2', 'p#2']);
  await turn();
  started[2]!.end();
  assert.equal(await late, 'p#3');
  assert.equal(started.length, 3);
  const fresh = reads.read('p', query('p')); // nothing runs now: it starts at once
  assert.equal(started.length, 4);
  started[3]!.end();
  assert.equal(await fresh, 'p#4');
});

test('Coalescer: keys do not wait for each other', async () => {
  const reads = new Coalescer<string>();
  const { started, query } = queries();
  const a = reads.read('a', query('a'));
  const b = reads.read('b', query('b'));
  assert.deepEqual(
    started.map((q) => q.key),
    ['a', 'b'],
  );
  started[1]!.end();
  assert.equal(await b, 'b#2');
  started[0]!.end();
  assert.equal(await a, 'a#1');
});

test('Coalescer: a failed query fails only the reads that shared it; the next query still runs', async () => {
  const reads = new Coalescer<string>();
  const { started, query } = queries();
  const first = reads.read('p', query('p'));
  const second = reads.read('p', query('p'));
  started[0]!.end(new Error('connection lost'));
  await assert.rejects(first, /connection lost/);
  await turn();
  started[1]!.end();
  assert.equal(await second, 'p#2');
});

test('TurnBatch handles what arrived in one turn together, after the turn, and what came later in the next', async () => {
  const batches: Array<readonly number[]> = [];
  const batch = new TurnBatch<number, number>((items) => {
    batches.push(items);
    return items.map((n) => n * 10);
  });
  const first = [1, 2, 3].map((n) => batch.submit(n));
  assert.deepEqual(batches, [], 'nothing runs before the turn ends');
  assert.deepEqual(await Promise.all(first), [10, 20, 30]);
  const second = batch.submit(4);
  assert.equal(await second, 40);
  assert.deepEqual(batches, [[1, 2, 3], [4]]);
});

test('TurnBatch: work that throws fails every item of its turn, and the next turn runs', async () => {
  let fail = true;
  const batch = new TurnBatch<number, number>((items) => {
    if (fail) throw new Error('database is locked');
    return items;
  });
  const doomed = [batch.submit(1), batch.submit(2)];
  for (const item of doomed) await assert.rejects(item, /database is locked/);
  fail = false;
  assert.equal(await batch.submit(3), 3);
});

test('an item of a sent batch fails at its own deadline (outcome unknown); the batch keeps its slot until it ends', async (t) => {
  const time = mockedTime(t);
  const { batcher, batches } = controlled(1, 100, 3000);
  time.watch('a', batcher.submit('a')); // sent at once, alone
  await time.advanceTo(1000);
  time.watch('b', batcher.submit('b')); // waits for the slot
  await time.advanceTo(3500);
  assert.deepEqual(time.answers.get('a'), { at: 3000, error: 'no answer in time: outcome unknown' });
  assert.equal(time.answers.has('b'), false, 'b still has until 4000');
  assert.equal(batches.length, 1, 'the slot is busy until the batch ends');
  // The batch ends late, with a failure for a: nobody is left to hear it, and it is no unhandled rejection.
  batches[0]!.finish([Promise.reject(new Error('late failure'))]);
  await time.advanceTo(3600);
  assert.deepEqual(
    batches.map((batch) => batch.items),
    [['a'], ['b']],
  );
  batches[1]!.finish();
  await time.advanceTo(3700);
  assert.equal(time.answers.get('b')?.value, 'B', 'b was sent when the slot freed, before its deadline');
  assert.equal(time.answers.get('a')!.at, 3000, 'a was answered once');
});
