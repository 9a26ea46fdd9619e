import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { GroupCommit } from '../../src/store/sqlite/group-commit.js';
import { openSqlite } from '../../src/store/sqlite/store.js';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-group-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const plant = (id: bigint, owner: string, name: string) => ({ id, owner, name, tag: null });

test('creates of one turn share a transaction and each gets its own answer, in order', async (t) => {
  const store = openSqlite(join(dir, 'order.db'));
  t.after(() => store.close());
  await store.migrate();
  const results = await Promise.all([
    store.createPlant(plant(1n, 'alice', 'fern')),
    store.createPlant(plant(1n, 'alice', 'fern')),
    store.createPlant(plant(1n, 'bob', 'rose')),
    store.createPlant(plant(2n, 'bob', 'rose')),
    store.deletePlant(2n, 'alice'),
    store.deletePlant(2n, 'bob'),
    store.deletePlant(2n, null),
  ]);
  assert.deepEqual(results, [
    { created: true },
    { created: false, existing: { id: 1n, owner: 'alice', name: 'fern', tag: null } },
    { created: false, existing: { id: 1n, owner: 'alice', name: 'fern', tag: null } },
    { created: true },
    false,
    true,
    false,
  ]);
});

test('a write that fails inside a batch fails alone; the others are committed', async (t) => {
  const db = new Database(join(dir, 'alone.db'));
  t.after(() => db.close());
  db.exec('CREATE TABLE t (v INTEGER NOT NULL)');
  const writes = new GroupCommit(db);
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  const outcomes = await Promise.allSettled([
    writes.run(() => insert.run(1).changes),
    writes.run(() => insert.run(null).changes), // NOT NULL: this one fails
    writes.run(() => insert.run(3).changes),
  ]);
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.deepEqual(db.prepare('SELECT v FROM t ORDER BY v').all(), [{ v: 1 }, { v: 3 }]);
});

test('rerunnable writes share one savepoint; when one throws, every write runs again alone and only that one fails', async (t) => {
  const statements: string[] = [];
  const db = new Database(join(dir, 'rerun.db'), { verbose: (sql) => void statements.push(String(sql)) });
  t.after(() => db.close());
  db.exec('CREATE TABLE t (v INTEGER NOT NULL)');
  const writes = new GroupCommit(db);
  const insert = db.prepare('INSERT INTO t VALUES (?)');
  const runs = new Map<number | null, number>();
  const write = (v: number | null) => () => {
    runs.set(v, (runs.get(v) ?? 0) + 1);
    return insert.run(v).changes;
  };
  const savepoints = () => statements.filter((sql) => /^SAVEPOINT/i.test(sql)).length;

  // Nothing fails: one savepoint for the batch, each write run once.
  await Promise.all([1, 2, 3].map((v) => writes.run(write(v), { rerunnable: true })));
  assert.equal(savepoints(), 1);
  assert.deepEqual([...runs.values()], [1, 1, 1]);

  // A write of another kind in the batch must never run twice: each write runs alone, once, even
  // when a rerunnable one after it throws.
  statements.length = 0;
  runs.clear();
  const mixed = await Promise.allSettled([
    writes.run(write(4)),
    writes.run(write(null), { rerunnable: true }), // NOT NULL: this one fails
    writes.run(write(5), { rerunnable: true }),
  ]);
  assert.deepEqual(
    mixed.map((o) => o.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.deepEqual(Object.fromEntries(runs), { 4: 1, null: 1, 5: 1 });
  assert.equal(savepoints(), 3, 'one savepoint per write');

  // One throws: the batch's savepoint is rolled back, then each runs in its own.
  statements.length = 0;
  runs.clear();
  const outcomes = await Promise.allSettled([
    writes.run(write(6), { rerunnable: true }),
    writes.run(write(null), { rerunnable: true }), // NOT NULL: this one fails
    writes.run(write(7), { rerunnable: true }),
  ]);
  assert.deepEqual(
    outcomes.map((o) => o.status),
    ['fulfilled', 'rejected', 'fulfilled'],
  );
  assert.deepEqual(Object.fromEntries(runs), { 6: 2, null: 2, 7: 1 }, 'the writes before the failure ran again');
  assert.equal(savepoints(), 1 + 3, "the batch's, then one per write");
  assert.deepEqual(
    db.prepare('SELECT v FROM t ORDER BY v').all(),
    [1, 2, 3, 4, 5, 6, 7].map((v) => ({ v })),
    'each row once',
  );
});

test('a write is committed before it is answered: another connection sees it at once', async (t) => {
  const path = join(dir, 'durable.db');
  const store = openSqlite(path);
  t.after(() => store.close());
  await store.migrate();
  const other = new Database(path, { readonly: true });
  t.after(() => other.close());
  const count = () => (other.prepare('SELECT count(*) AS n FROM plants').get() as { n: number }).n;
  const pending = Array.from({ length: 50 }, (_, i) => store.createPlant(plant(BigInt(i), 'alice', `p${i}`)));
  assert.equal(count(), 0, 'nothing is visible before the commit');
  await Promise.all(pending);
  assert.equal(count(), 50);
});

// Another connection's write lock must never freeze the event loop.

/** A second connection on the file that holds the write lock until released. */
function holdWriteLock(path: string): { release(): void } {
  const holder = new Database(path);
  holder.exec('BEGIN IMMEDIATE');
  return {
    release: () => {
      if (holder.inTransaction) holder.exec('ROLLBACK');
      holder.close();
    },
  };
}

test('while another connection holds the write lock, reads are answered and a write waits without blocking, then commits', async (t) => {
  const path = join(dir, 'held.db');
  const store = openSqlite(path, { locks: 'event-loop', lockWaitMs: 10_000 });
  t.after(() => store.close());
  await store.migrate();
  await store.createPlant(plant(1n, 'alice', 'fern'));
  const lock = holdWriteLock(path);
  t.after(() => lock.release());

  const settled: string[] = [];
  const write = store.createPlant(plant(2n, 'alice', 'moss')).then((result) => {
    settled.push('write');
    return result;
  });
  // With a blocking busy_timeout the write would hold the thread, and this read would wait for it.
  const rows = await store.listPlants({ owner: 'alice', tag: null, fromId: -(2n ** 63n), limit: 10 });
  settled.push('read');
  assert.deepEqual(
    rows.map((r) => r.name),
    ['fern'],
  );
  // The event loop turns: timers fire while the write waits for the lock.
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(settled, ['read'], 'the write is still waiting for the lock');
  lock.release();
  assert.deepEqual(await write, { created: true });
  assert.deepEqual(settled, ['read', 'write']);
  const after = await store.listPlants({ owner: 'alice', tag: null, fromId: -(2n ** 63n), limit: 10 });
  assert.deepEqual(
    after.map((r) => r.name),
    ['fern', 'moss'],
  );
});

test('a write that cannot get the lock within its wait fails as unavailable (a 503), storing nothing, and each write keeps its own deadline', async (t) => {
  const path = join(dir, 'timeout.db');
  const store = openSqlite(path, { locks: 'event-loop', lockWaitMs: 200 });
  t.after(() => store.close());
  await store.migrate();
  const lock = holdWriteLock(path);
  t.after(() => lock.release());

  // The writes' waits are measured on performance.now(), here a clock the test moves: the second
  // write comes 100 ms after the first, and the first's 200 ms run out while the second has waited
  // 100, however slowly this machine runs the tries in between (each a short real timer).
  let now = 1000;
  t.mock.method(performance, 'now', () => now);
  const first = store.createPlant(plant(1n, 'alice', 'fern'));
  now += 100;
  const second = store.deletePlant(1n, 'alice');
  now += 100;
  await assert.rejects(first, (error: Error) => error.name === 'StoreUnavailableError');
  // The later write is still within its own wait when the first fails: released now, it commits.
  lock.release();
  assert.equal(await second, false); // committed, and it found nothing: the first create stored nothing
  const rows = await store.listPlants({ owner: null, tag: null, fromId: -(2n ** 63n), limit: 10 });
  assert.deepEqual(rows, []);
});

test('the CLI keeps SQLite waiting for a lock (busy_timeout); the server never waits inside SQLite', (t) => {
  const cli = openSqlite(join(dir, 'modes.db'));
  const server = openSqlite(join(dir, 'modes.db'), { locks: 'event-loop' });
  t.after(() => Promise.all([cli.close(), server.close()]));
  const timeout = (store: unknown) =>
    ((store as { db: Database.Database }).db.pragma('busy_timeout', { simple: true }) as number) ?? 0;
  assert.equal(timeout(cli), 5000);
  assert.equal(timeout(server), 0);
});
