import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import pg from 'pg';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
import { createPool } from '../../src/store/postgres/connection.js';
import { openPostgres } from '../../src/store/postgres/store.js';
import type { PlantRecord } from '../../src/store/store.js';
import { openScratchPostgres, postgresUrl, scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { storeContract } from './store-contract.js';

after(stopSharedPostgres);
storeContract('postgres', openScratchPostgres);

const plant = (id: bigint, owner: string): PlantRecord => ({ id, owner, name: `plant ${id}`, tag: null });

/** Two instances (two pools) on one database, the way a fleet shares it. */
async function twoInstances(t: { after: (fn: () => Promise<void>) => void }) {
  const scratch = await scratchSchema();
  const a = openPostgres(scratch.url, { poolSize: 4 });
  const b = openPostgres(scratch.url, { poolSize: 4 });
  t.after(async () => {
    await Promise.all([a.close(), b.close()]);
    await scratch.drop();
  });
  await a.migrate();
  return { a, b };
}

const ids = (from: number, count: number): bigint[] => Array.from({ length: count }, (_, i) => BigInt(from + i));

test('two instances creating the same ids in opposite orders never deadlock: each id is created once', async (t) => {
  const { a, b } = await twoInstances(t);
  for (let round = 0; round < 4; round++) {
    const wanted = ids(round * 10_000, 2000);
    // Past the first two, each instance's creates wait for a slot and go as one batch.
    const results = await Promise.all([
      ...wanted.map((id) => a.createPlant(plant(id, 'alice'))),
      ...[...wanted].reverse().map((id) => b.createPlant(plant(id, 'bob'))),
    ]);
    assert.equal(results.filter((r) => r.created).length, wanted.length);
    for (const r of results) if (!r.created) assert.ok(wanted.includes(r.existing.id));
  }
});

test('an import and creates of the same ids in opposite orders never deadlock', async (t) => {
  const { a, b } = await twoInstances(t);
  for (let round = 0; round < 4; round++) {
    const wanted = ids(round * 10_000, 2000);
    const [imported, ...created] = await Promise.all([
      a.insertBatch([...wanted].reverse().map((id) => plant(id, 'importer'))),
      ...wanted.map((id) => b.createPlant(plant(id, 'bob'))),
    ]);
    const createdCount = created.filter((r) => (r as { created: boolean }).created).length;
    assert.equal((imported as { inserted: number }).inserted + createdCount, wanted.length);
  }
});

/**
 * A store on a scratch schema migrated as far as `version` and no further, as a database of that
 * version is, and a client to write its rows as that version did.
 */
async function migratedTo(
  version: number,
  t: { after: (fn: () => Promise<void>) => void },
): Promise<{ client: pg.Client; store: ReturnType<typeof openPostgres> }> {
  const scratch = await scratchSchema();
  const client = new pg.Client({ connectionString: scratch.url });
  await client.connect();
  const store = openPostgres(scratch.url, { poolSize: 2 });
  t.after(async () => {
    await store.close();
    await client.end();
    await scratch.drop();
  });
  await client.query(
    'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
  );
  for (const m of postgresMigrations.filter((m) => m.version <= version)) {
    await client.query(m.sql);
    await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
  }
  return { client, store };
}

test('migration 4 maps the disabled reasons version 2 stored to gone, failing; active webhooks have none', async (t) => {
  const { client, store } = await migratedTo(3, t);
  await client.query(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at,
      failing_since, disabled_reason) VALUES
    ('gone', 'alice', false, 'https://hooks.example/1', 'plant.created', 'disabled', 's', 1, 5, 'the receiver answered 410 Gone'),
    ('failing', 'alice', false, 'https://hooks.example/1', 'plant.created', 'disabled', 's', 1, 5, 'every attempt failed for 5 days'),
    ('active', 'alice', false, 'https://hooks.example/1', 'plant.created', 'active', 's', 1, 7, NULL)`);
  assert.deepEqual(await store.migrate(), [4, 5, 6, 7, 8, 9, 10, 11, 12]);
  const hooks = await store.listWebhooks(null);
  assert.deepEqual(hooks.map((w) => [w.id, w.status, w.disabledReason, w.failingSince, w.description]).sort(), [
    ['active', 'active', null, 7, ''],
    ['failing', 'disabled', 'failing', 5, ''],
    ['gone', 'disabled', 'gone', 5, ''],
  ]);
});

test("migration 5 names each logged attempt's webhook, so that the attempts of version 4 count in its activity", async (t) => {
  const { client, store } = await migratedTo(4, t);
  const hour = 3_600_000;
  await client.query(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at) VALUES
      ('wh-1', 'alice', false, 'https://hooks.example/1', 'plant.created', 'active', 's', 1),
      ('wh-2', 'alice', false, 'https://hooks.example/2', 'plant.created', 'active', 's', 1)`);
  await client.query(`INSERT INTO deliveries (id, webhook_id, event_id, type, status, attempts, created_at) VALUES
      (1, 'wh-1', 1, 'plant.created', 'delivered', 2, ${hour}), (2, 'wh-2', 1, 'plant.created', 'delivered', 1, ${hour})`);
  await client.query(`INSERT INTO delivery_attempts VALUES (1, 1, ${hour + 5}, 503, 4, 'the receiver answered 503', NULL),
      (1, 2, ${2 * hour + 5}, 204, 4, NULL, ''), (2, 1, ${hour + 9}, 200, 4, NULL, '')`);
  assert.deepEqual(await store.migrate(), [5, 6, 7, 8, 9, 10, 11, 12]);
  assert.deepEqual(await store.countAttempts('wh-1', 'alice', { from: hour, bucketMs: hour, buckets: 2 }), [
    { bucket: 0, delivered: 0, failed: 1 },
    { bucket: 1, delivered: 1, failed: 0 },
  ]);
  assert.deepEqual(await store.countAttempts('wh-2', null, { from: hour, bucketMs: hour, buckets: 1 }), [
    { bucket: 0, delivered: 1, failed: 0 },
  ]);
  assert.equal(await store.countAttempts('wh-2', 'bob', { from: hour, bucketMs: hour, buckets: 1 }), undefined);
});

test("migration 12 copies each delivery's plant: a delete stored by version 11 waits behind its plant's pending create", async (t) => {
  const { client, store } = await migratedTo(11, t);
  await client.query(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
      VALUES ('wh-1', 'alice', false, 'https://hooks.example/1', 'plant.created plant.deleted', 'active', 's', 1)`);
  await client.query(`INSERT INTO events (id, type, owner, plant_id, payload, created_at) VALUES
      (1, 'plant.created', 'alice', 41, '{"id":41,"name":"a"}', 1), (2, 'plant.created', 'alice', 42, '{"id":42,"name":"b"}', 1),
      (3, 'plant.deleted', 'alice', 41, '{"id":41}', 1)`);
  await client.query('UPDATE delivery_cursor SET fanned_through = 3');
  await client.query('UPDATE event_watermark SET through = 3');
  await client.query(`INSERT INTO deliveries (id, webhook_id, event_id, type, status, attempts, next_attempt_at, created_at) VALUES
      (1, 'wh-1', 1, 'plant.created', 'pending', 1, 0, 1), (2, 'wh-1', 2, 'plant.created', 'pending', 0, 0, 1),
      (3, 'wh-1', 3, 'plant.deleted', 'pending', 0, 0, 1), (4, 'wh-1', 0, 'webhook.ping', 'pending', 0, 0, 1)`);
  assert.deepEqual(await store.migrate(), [12]);
  const { rows } = await client.query<{ id: string; plant_id: string | null }>(
    'SELECT id, plant_id FROM deliveries ORDER BY id',
  );
  assert.deepEqual(
    rows.map((r) => [r.id, r.plant_id]),
    [
      ['1', '41'],
      ['2', '42'],
      ['3', '41'],
      ['4', null],
    ],
  );
  const claimed = await store.claimDeliveries({
    holder: 'h',
    leaseMs: 60_000,
    limit: 10,
    perWebhook: 10,
    busy: new Map(),
  });
  assert.deepEqual(claimed.map((d) => Number(d.id)).sort(), [1, 2, 4], "plant 41's delete waits for its create");
});

test('migration 10 counts the plants already stored, and its triggers count what SQL by hand changes', async (t) => {
  const { client, store } = await migratedTo(9, t);
  await client.query(
    `INSERT INTO plants (id, owner, name, tag) VALUES (1, 'alice', 'a', NULL), (2, 'alice', 'b', 'x'), (3, 'bob', 'c', NULL)`,
  );
  assert.deepEqual(await store.migrate(), [10, 11, 12]);
  assert.equal(await store.countPlants(), 3);
  await client.query("DELETE FROM plants WHERE owner = 'alice'");
  await client.query("INSERT INTO plants VALUES (9, 'carol', 'd', NULL), (10, 'carol', 'e', NULL)");
  assert.equal(await store.countPlants(), 3);
  await client.query('TRUNCATE plants');
  assert.equal(await store.countPlants(), 0);
  await client.query("INSERT INTO plants VALUES (11, 'dave', 'f', NULL)");
  assert.equal(await store.countPlants(), 1);
});

test('the plant count never waits for a writer: a transaction under way is read as committed', async (t) => {
  const { client, store } = await migratedTo(10, t);
  await client.query("INSERT INTO plants VALUES (1, 'alice', 'a', NULL), (2, 'alice', 'b', NULL)");
  assert.equal(await store.countPlants(), 2);
  await client.query('BEGIN');
  await client.query("INSERT INTO plants VALUES (3, 'alice', 'c', NULL)"); // its backend's row, locked till COMMIT
  assert.equal(await store.countPlants(), 2);
  await client.query('COMMIT');
  assert.equal(await store.countPlants(), 3);
  const { rows } = await client.query<{ rows: string }>('SELECT count(*) AS rows FROM plant_count_changes');
  assert.equal(rows[0]!.rows, '0', 'a count folds what it read into the total');
});

test('two instances writing at once and counting at once: the count is exact', async (t) => {
  const { a, b } = await twoInstances(t);
  const writes = [a, b].map((store, s) =>
    (async () => {
      for (let round = 0; round < 10; round++) {
        await Promise.all(ids(s * 10_000 + round * 50, 50).map((id) => store.createPlant(plant(id, 'alice'))));
        await Promise.all([a.countPlants(), b.countPlants()]);
        await Promise.all(ids(s * 10_000 + round * 50, 10).map((id) => store.deletePlant(id, 'alice')));
      }
    })(),
  );
  await Promise.all(writes);
  assert.deepEqual(await Promise.all([a.countPlants(), b.countPlants()]), [800, 800]);
  assert.equal((await a.listPlants({ owner: null, tag: null, fromId: 0n, limit: 10_000 })).length, 800);
});

test("an owner's page, with a tag or without, is an index-only scan: no row of the table is read", async (t) => {
  // A database of its own: VACUUM marks pages all-visible only when no transaction older than
  // their rows is open in the database, and other test files keep transactions open in theirs.
  const base = new URL(await postgresUrl());
  const name = `plan_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  base.pathname = `/${name}`;
  const client = new pg.Client({ connectionString: base.toString() });
  await client.connect();
  t.after(async () => {
    await client.end();
    await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
    await admin.end();
  });
  for (const m of postgresMigrations) await client.query(m.sql);
  await client.query(`INSERT INTO plants SELECT i, 'user' || (i % 100), 'plant ' || i, CASE WHEN i % 3 > 0 THEN 'tag' || (i % 5) END
    FROM generate_series(1, 20000) AS s(i)`);
  await client.query('VACUUM ANALYZE plants');
  const plan = async (sql: string, values: unknown[]) =>
    (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF) ${sql}`, values)).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
  // The statements of src/store/postgres/statements.ts, as its `list` builds them.
  const page = (columns: string[]) =>
    `SELECT id, owner, name, tag FROM plants WHERE ${columns.map((c, i) => `${c} = $${i + 1} AND `).join('')}id >= $${columns.length + 1} ORDER BY id LIMIT 100`;
  const owner = await plan(page(['owner']), ['user7', 0]);
  const ownerTag = await plan(page(['owner', 'tag']), ['user7', 'tag2', 0]);
  assert.match(owner, /Index Only Scan using plants_owner_page/);
  assert.match(owner, /Heap Fetches: 0/);
  assert.match(ownerTag, /Index Only Scan using plants_owner_tag_page/);
  assert.match(ownerTag, /Heap Fetches: 0/);
});

test("the service's connections run without JIT, unless DATABASE_URL's options turn it on", async (t) => {
  const scratch = await scratchSchema();
  const on = new URL(scratch.url);
  on.searchParams.set('options', `${on.searchParams.get('options')} -c jit=on`);
  const pools = [createPool(scratch.url, { poolSize: 1 }), createPool(on.toString(), { poolSize: 1 })];
  t.after(async () => {
    await Promise.all(pools.map((pool) => pool.end()));
    await scratch.drop();
  });
  const show = async (pool: pg.Pool, name: string) =>
    ((await pool.query<Record<string, string>>(`SHOW ${name}`)).rows[0] ?? {})[name];
  assert.equal(await show(pools[0]!, 'jit'), 'off');
  assert.equal(await show(pools[0]!, 'search_path'), scratch.schema, "the URL's own options are kept");
  assert.equal(await show(pools[1]!, 'jit'), 'on');
});
