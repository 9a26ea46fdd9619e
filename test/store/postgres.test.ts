import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { openPostgres } from '../../src/store/postgres.js';
import type { PlantRecord } from '../../src/store/store.js';
import { openScratchPostgres, scratchSchema, stopSharedPostgres } from '../support/postgres.js';
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
