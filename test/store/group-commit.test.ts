import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { GroupCommit } from '../../src/store/group-commit.js';
import { openSqlite } from '../../src/store/sqlite.js';

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
