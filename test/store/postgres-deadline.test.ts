import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';
import { openPostgres } from '../../src/store/postgres/store.js';
import { type PlantRecord, StoreUnavailableError } from '../../src/store/store.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

after(stopSharedPostgres);

/** A create's deadline on PostgreSQL: the pool's connection timeout (docs/decisions.md, Operations). */
const DEADLINE_MS = 3000;

const plant = (n: number): PlantRecord => ({ id: BigInt(n), owner: 'alice', name: `plant ${n}`, tag: null });

test('with the plants table locked, each create gets its 503 at its own deadline, in the order they came, and a retry is safe', async (t) => {
  const scratch = await scratchSchema();
  const store = openPostgres(scratch.url, { poolSize: 4 });
  const locker = new pg.Client({ connectionString: scratch.url });
  t.after(async () => {
    await locker.end();
    await store.close();
    await scratch.drop();
  });
  await store.migrate();
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE plants'); // every INSERT waits for it

  const answers: Array<{ n: number; waitedMs: number; error: unknown }> = [];
  const create = (n: number): Promise<void> => {
    const sentAt = performance.now();
    return store.createPlant(plant(n)).then(
      () => assert.fail(`create ${n} succeeded while the table was locked`),
      (error: unknown) => void answers.push({ n, waitedMs: performance.now() - sentAt, error }),
    );
  };
  // 1 and 2 go out at once, alone (two write slots), and wait for the lock; 3, 4 and 5 wait for a slot.
  const creates = [create(1), create(2), create(3)];
  await sleep(1000);
  creates.push(create(4));
  await sleep(1000);
  creates.push(create(5));
  await Promise.all(creates);

  assert.deepEqual(
    answers.map((a) => a.n),
    [1, 2, 3, 4, 5],
    'answered in the order they came, sent or waiting: each at its own deadline',
  );
  for (const { n, waitedMs, error } of answers) {
    assert.ok(error instanceof StoreUnavailableError, `create ${n}: a 503, not ${String(error)}`);
    // A generous bound: before the fix a create that came 1 s after the first waiter waited 5 s.
    assert.ok(waitedMs >= DEADLINE_MS - 1 && waitedMs < DEADLINE_MS + 1500, `create ${n} waited ${waitedMs} ms`);
  }

  // The lock goes: the INSERTs of 1 and 2, if they were sent (on a loaded machine a connection may
  // not have been made within the deadline), commit after their 503: the outcome was unknown.
  // 3, 4 and 5 never reached the database. An identical retry is safe either way.
  await locker.query('ROLLBACK');
  const retries = await Promise.all([1, 2, 3, 4, 5].map((n) => store.createPlant(plant(n))));
  for (const n of [1, 2]) {
    const retry = retries[n - 1]!;
    assert.ok(
      retry.created || isDeepStrictEqual(retry, { created: false, existing: plant(n) }),
      `create ${n}'s retry: stored now, or found exactly as sent (${JSON.stringify(retry, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))})`,
    );
  }
  assert.deepEqual(retries.slice(2), [{ created: true }, { created: true }, { created: true }]);
  assert.equal(await store.countPlants(), 5);
});
