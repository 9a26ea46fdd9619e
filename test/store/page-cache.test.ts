import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { PageCache } from '../../src/store/sqlite/page-cache.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { PlantPage } from '../../src/store/store.js';

// The SQLite store answers repeated list pages from a cache. These tests prove it is never stale:
// every write, by this connection or any other, is seen by the next read.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-pages-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const plant = (id: bigint, owner: string, name: string, tag: string | null = null) => ({ id, owner, name, tag });
const page = (owner: string | null, tag: string | null = null, limit = 10): PlantPage => ({
  owner,
  tag,
  fromId: -(2n ** 63n),
  limit,
});
const names = async (store: ReturnType<typeof openSqlite>, p: PlantPage) =>
  (await store.listPlants(p)).map((row) => row.name);

async function opened(file: string) {
  const store = openSqlite(join(dir, file));
  await store.migrate();
  return store;
}

test("this connection's creates and deletes are seen by the next list, for the owner and for admins", async (t) => {
  const store = await opened('own.db');
  t.after(() => store.close());
  await store.createPlant(plant(1n, 'alice', 'fern'));
  assert.deepEqual(await names(store, page('alice')), ['fern']);
  assert.deepEqual(await names(store, page(null)), ['fern']);
  assert.deepEqual(await names(store, page('bob')), []);

  await store.createPlant(plant(2n, 'bob', 'rose'));
  assert.deepEqual(await names(store, page('alice')), ['fern']);
  assert.deepEqual(await names(store, page('bob')), ['rose']);
  assert.deepEqual(await names(store, page(null)), ['fern', 'rose']);

  assert.equal(await store.deletePlant(1n, 'alice'), true);
  assert.deepEqual(await names(store, page('alice')), []);
  assert.deepEqual(await names(store, page(null)), ['rose']);

  assert.equal(await store.deletePlant(2n, null), true); // an admin's delete
  assert.deepEqual(await names(store, page('bob')), []);
  assert.deepEqual(await names(store, page(null)), []);
});

test('a tag filter and a limit are separate pages', async (t) => {
  const store = await opened('keys.db');
  t.after(() => store.close());
  await store.insertBatch([plant(1n, 'alice', 'fern', 'green'), plant(2n, 'alice', 'rose', 'red')]);
  assert.deepEqual(await names(store, page('alice', 'green')), ['fern']);
  assert.deepEqual(await names(store, page('alice', 'red')), ['rose']);
  assert.deepEqual(await names(store, page('alice', null, 1)), ['fern']);
  assert.deepEqual(await names(store, page('alice', null, 2)), ['fern', 'rose']);
  assert.deepEqual(await names(store, { ...page('alice'), fromId: 2n }), ['rose']);
});

test('an import through this store is seen by the next list', async (t) => {
  const store = await opened('batch.db');
  t.after(() => store.close());
  assert.deepEqual(await names(store, page('alice')), []);
  await store.insertBatch([plant(5n, 'alice', 'moss')]);
  assert.deepEqual(await names(store, page('alice')), ['moss']);
});

test("another connection's commits (another process, the CLI) are seen by the next list", async (t) => {
  const server = await opened('shared.db');
  const other = openSqlite(join(dir, 'shared.db'));
  t.after(async () => {
    await server.close();
    await other.close();
  });
  await server.createPlant(plant(1n, 'alice', 'fern'));
  assert.deepEqual(await names(server, page('alice')), ['fern']);

  await other.createPlant(plant(2n, 'alice', 'rose'));
  assert.deepEqual(await names(server, page('alice')), ['fern', 'rose']);

  await other.deletePlant(1n, 'alice');
  assert.deepEqual(await names(server, page('alice')), ['rose']);

  await other.insertBatch([plant(3n, 'bob', 'moss')]);
  assert.deepEqual(await names(server, page(null)), ['rose', 'moss']);
});

test('PageCache holds at most its row budget, and an over-budget page is not kept', () => {
  const cache = new PageCache<number>(5);
  cache.set('alice', 'a', [1, 2, 3]);
  assert.deepEqual(cache.get('alice', 'a'), [1, 2, 3]);
  cache.set('bob', 'b', [4, 5, 6]); // 6 > 5: starts over, then keeps bob's page
  assert.equal(cache.get('alice', 'a'), undefined);
  assert.deepEqual(cache.get('bob', 'b'), [4, 5, 6]);
  cache.set('carol', 'c', [1, 2, 3, 4, 5, 6]);
  assert.equal(cache.get('carol', 'c'), undefined);
  assert.deepEqual(cache.get('bob', 'b'), [4, 5, 6]);
});

test("PageCache.invalidate drops the owner's pages and the cross-owner ones, nobody else's", () => {
  const cache = new PageCache<number>(100);
  cache.set('alice', 'a', [1]);
  cache.set('bob', 'b', [2]);
  cache.set(null, 'all', [1, 2]);
  cache.invalidate('alice');
  assert.equal(cache.get('alice', 'a'), undefined);
  assert.equal(cache.get(null, 'all'), undefined);
  assert.deepEqual(cache.get('bob', 'b'), [2]);
  cache.check(1);
  assert.equal(cache.get('bob', 'b'), undefined, 'a new data_version drops everything');
});

test('PageCache counts empty pages too, so made-up tags or cursors cannot grow it without bound', () => {
  const cache = new PageCache<number>(100);
  for (let i = 0; i < 1000; i++) cache.set('alice', `tag-${i}`, []);
  let kept = 0;
  for (let i = 0; i < 1000; i++) if (cache.get('alice', `tag-${i}`)) kept += 1;
  assert.ok(kept <= 100, `at most 100 empty pages kept, got ${kept}`);
  assert.ok(kept > 0);
});
