import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
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
      [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11],
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

/** A database file at `version`: the migrations up to it applied and recorded, as the service would have. */
function migratedTo(path: string, version: number): Database.Database {
  const db = new Database(path);
  db.exec(
    'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
  );
  for (const m of sqliteMigrations.filter((m) => m.version <= version)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
  }
  return db;
}

test('migration 3 starts the delivery cursor at the newest event: what version 2 fanned out is not fanned out again', async (t) => {
  const path = join(dir, 'upgrade.db');
  // A version-2 database: one event whose delivery version 2 wrote with the create.
  const db = migratedTo(path, 2);
  db.exec(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
      VALUES ('wh-1', 'alice', 0, 'https://hooks.example/1', 'plant.created plant.deleted', 'active', 's', 1);
    INSERT INTO events (type, owner, plant_id, payload, created_at) VALUES ('plant.created', 'alice', 1, '{"id":1,"name":"a"}', 2);
    INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
      VALUES ('wh-1', 1, 'plant.created', 'pending', 0, 2, 2);`);
  db.close();
  const store = openSqlite(path);
  t.after(() => store.close());
  assert.deepEqual(await store.migrate(), [3, 4, 5, 6, 7, 8, 9, 10, 11]);
  await store.createPlant({ id: 2n, owner: 'alice', name: 'b', tag: null });
  const deliveries = await store.listDeliveries('wh-1', 'alice', 10);
  assert.deepEqual(
    deliveries?.map((d) => d.eventId),
    [2n, 1n],
    'one delivery per event: the old one kept, the new one fanned out',
  );
});

test('migration 4 maps the disabled reasons version 2 stored to gone, failing; active webhooks have none', async (t) => {
  const path = join(dir, 'upgrade-4.db');
  const db = migratedTo(path, 3);
  const insert = db.prepare(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at,
      failing_since, disabled_reason) VALUES (?, 'alice', 0, 'https://hooks.example/1', 'plant.created', ?, 's', 1, ?, ?)`);
  insert.run('gone', 'disabled', 5, 'the receiver answered 410 Gone');
  insert.run('failing', 'disabled', 5, 'every attempt failed for 5 days');
  insert.run('active', 'active', 7, null);
  db.close();
  const store = openSqlite(path);
  t.after(() => store.close());
  assert.deepEqual(await store.migrate(), [4, 5, 6, 7, 8, 9, 10, 11]);
  const hooks = await store.listWebhooks(null);
  assert.deepEqual(hooks.map((w) => [w.id, w.status, w.disabledReason, w.failingSince, w.description]).sort(), [
    ['active', 'active', null, 7, ''],
    ['failing', 'disabled', 'failing', 5, ''],
    ['gone', 'disabled', 'gone', 5, ''],
  ]);
});

test("migration 6 names each logged attempt's webhook, so that the attempts of version 5 count in its activity", async (t) => {
  const path = join(dir, 'upgrade-6.db');
  const db = migratedTo(path, 5);
  const hour = 3_600_000;
  db.exec(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
      VALUES ('wh-1', 'alice', 0, 'https://hooks.example/1', 'plant.created', 'active', 's', 1),
             ('wh-2', 'alice', 0, 'https://hooks.example/2', 'plant.created', 'active', 's', 1);
    INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, created_at) VALUES
      ('wh-1', 1, 'plant.created', 'delivered', 2, ${hour}), ('wh-2', 1, 'plant.created', 'delivered', 1, ${hour});
    INSERT INTO delivery_attempts VALUES (1, 1, ${hour + 5}, 503, 4, 'the receiver answered 503', NULL),
      (1, 2, ${2 * hour + 5}, 204, 4, NULL, ''), (2, 1, ${hour + 9}, 200, 4, NULL, '');`);
  db.close();
  const store = openSqlite(path);
  t.after(() => store.close());
  assert.deepEqual(await store.migrate(), [6, 7, 8, 9, 10, 11]);
  assert.deepEqual(await store.countAttempts('wh-1', 'alice', { from: hour, bucketMs: hour, buckets: 2 }), [
    { bucket: 0, delivered: 0, failed: 1 },
    { bucket: 1, delivered: 1, failed: 0 },
  ]);
  assert.deepEqual(await store.countAttempts('wh-2', null, { from: hour, bucketMs: hour, buckets: 1 }), [
    { bucket: 0, delivered: 1, failed: 0 },
  ]);
  assert.equal(await store.countAttempts('wh-2', 'bob', { from: hour, bucketMs: hour, buckets: 1 }), undefined);
});

test('migration 10 counts the plants already stored, and its triggers count what SQL by hand changes', async (t) => {
  const path = join(dir, 'upgrade-10.db');
  const db = migratedTo(path, 9);
  db.exec(
    `INSERT INTO plants (id, owner, name, tag) VALUES (1, 'alice', 'a', NULL), (2, 'alice', 'b', 'x'), (3, 'bob', 'c', NULL)`,
  );
  db.close();
  const store = openSqlite(path);
  t.after(() => store.close());
  assert.deepEqual(await store.migrate(), [10, 11]);
  assert.equal(await store.countPlants(), 3);
  const other = new Database(path);
  other.exec("DELETE FROM plants WHERE owner = 'alice'; INSERT INTO plants VALUES (9, 'carol', 'd', NULL)");
  other.close();
  assert.equal(await store.countPlants(), 2);
});

test("migration 11 copies each delivery's plant: a delete stored by version 10 waits behind its plant's pending create", async (t) => {
  const path = join(dir, 'upgrade-11.db');
  const db = migratedTo(path, 10);
  db.exec(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
      VALUES ('wh-1', 'alice', 0, 'https://hooks.example/1', 'plant.created plant.deleted', 'active', 's', 1);
    INSERT INTO events (id, type, owner, plant_id, payload, created_at) VALUES
      (1, 'plant.created', 'alice', 41, '{"id":41,"name":"a"}', 1), (2, 'plant.created', 'alice', 42, '{"id":42,"name":"b"}', 1),
      (3, 'plant.deleted', 'alice', 41, '{"id":41}', 1);
    UPDATE delivery_cursor SET fanned_through = 3;
    INSERT INTO deliveries (id, webhook_id, event_id, type, status, attempts, next_attempt_at, created_at) VALUES
      (1, 'wh-1', 1, 'plant.created', 'pending', 1, 0, 1), (2, 'wh-1', 2, 'plant.created', 'pending', 0, 0, 1),
      (3, 'wh-1', 3, 'plant.deleted', 'pending', 0, 0, 1), (4, 'wh-1', 0, 'webhook.ping', 'pending', 0, 0, 1);`);
  db.close();
  const store = openSqlite(path);
  t.after(() => store.close());
  assert.deepEqual(await store.migrate(), [11]);
  const read = new Database(path, { readonly: true });
  assert.deepEqual(read.prepare('SELECT id, plant_id FROM deliveries ORDER BY id').raw().all(), [
    [1, 41],
    [2, 42],
    [3, 41],
    [4, null],
  ]);
  read.close();
  const claimed = await store.claimDeliveries({
    holder: 'h',
    leaseMs: 60_000,
    limit: 10,
    perWebhook: 10,
    busy: new Map(),
  });
  assert.deepEqual(claimed.map((d) => Number(d.id)).sort(), [1, 2, 4], "plant 41's delete waits for its create");
});

test("an owner's page, with a tag or without, is read from a covering index: no row of the table is read", (t) => {
  const db = migratedTo(join(dir, 'plan.db'), sqliteMigrations.at(-1)!.version);
  t.after(() => db.close());
  const plan = (sql: string) =>
    (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all() as Array<{ detail: string }>).map((r) => r.detail).join('; ');
  // The statements of src/store/sqlite/plants.ts, as its `list` builds them.
  const owner = plan("SELECT id, owner, name, tag FROM plants WHERE owner = 'a' AND id >= 0 ORDER BY id LIMIT 100");
  const ownerTag = plan(
    "SELECT id, owner, name, tag FROM plants WHERE owner = 'a' AND tag = 't' AND id >= 0 ORDER BY id LIMIT 100",
  );
  assert.match(owner, /USING COVERING INDEX plants_owner_page \(owner=\? AND id>\?\)/);
  assert.match(ownerTag, /USING COVERING INDEX plants_owner_tag_page \(owner=\? AND tag=\? AND id>\?\)/);
  assert.doesNotMatch(`${owner}; ${ownerTag}`, /TEMP B-TREE/, 'in id order from the index: no sort');
});
