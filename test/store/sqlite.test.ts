import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { openSqlite } from '../../src/store/sqlite.js';
import { storeContract } from './store-contract.js';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-sqlite-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

storeContract('sqlite (in memory)', () => Promise.resolve(openSqlite(':memory:')));
storeContract('sqlite (file)', () => Promise.resolve(openSqlite(join(dir, `store-${n++}.db`))));

test('a SQLite file is opened in WAL mode with synchronous=FULL, its folder created', async () => {
  const path = join(dir, 'nested', 'deeper', 'plants.db');
  const store = openSqlite(path);
  await store.migrate();
  await store.close();
  const db = new Database(path, { readonly: true });
  try {
    assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    assert.deepEqual(
      db
        .prepare('SELECT version FROM schema_migrations')
        .all()
        .map((r) => (r as { version: number }).version),
      [1, 2],
    );
  } finally {
    db.close();
  }
});

test('two stores on one file see each other: what one commits the other reads', async (t) => {
  const path = join(dir, 'shared.db');
  const a = openSqlite(path);
  const b = openSqlite(path);
  t.after(async () => {
    await a.close();
    await b.close();
  });
  await a.migrate();
  await b.migrate();
  await a.createPlant({ id: 1n, owner: 'alice', name: 'fern', tag: null });
  const seen = await b.createPlant({ id: 1n, owner: 'bob', name: 'rose', tag: null });
  assert.equal(seen.created, false);
});
