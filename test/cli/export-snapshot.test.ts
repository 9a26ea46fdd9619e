import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, test } from 'node:test';
import { openPostgres } from '../../src/store/postgres/store.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { exportPlants } from '../../src/transfer/export.js';
import { parseLine } from '../../src/transfer/plant-line.js';
import { BIN, runCli, mintCliToken, startServer } from '../process.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import {
  SEED_OWNER,
  WriteLoad,
  allEvents,
  instantsOf,
  missedWrites,
  plantKey,
  seedId,
  seedPlants,
} from './snapshot-support.js';
import { underTest } from '../support/engines.js';

// Operations issue, 5: `plant-store export` reads one snapshot (one read transaction on SQLite,
// REPEATABLE READ on PostgreSQL), so an export under write load is the store at one instant.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-export-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

interface Database {
  /** DATABASE_URL */
  readonly url: string;
  /** A store of its own on that database: another connection than the server's and the export's. */
  open(): Store;
  drop(): Promise<void>;
}

const engines: Array<[string, () => Promise<Database>]> = [
  [
    'SQLite',
    () => {
      const path = join(dir, `store-${n++}.db`);
      return Promise.resolve({ url: `sqlite:${path}`, open: () => openSqlite(path), drop: async () => {} });
    },
  ],
  [
    'PostgreSQL',
    async () => {
      const scratch = await scratchSchema();
      return { url: scratch.url, open: () => openPostgres(scratch.url, { poolSize: 2 }), drop: () => scratch.drop() };
    },
  ],
];

const SEEDED = 20_000;
/** Written while the export is held mid-stream: above every other id, so in its last page. */
const LATE_IDS = Array.from({ length: 50 }, (_, i) => 9_000_000_000_000_000_000n + BigInt(i));
/** Deleted while the export is held: the seeded plants with the highest ids, in its last seeded page. */
const LATE_DELETES = Array.from({ length: 50 }, (_, i) => seedId(SEEDED - 1 - i));

const parseExport = (text: string): Map<bigint, string> => {
  const plants = new Map<bigint, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const plant = parseLine(line);
    assert.ok(!('error' in plant), line);
    plants.set(plant.id, plantKey(plant));
  }
  return plants;
};

for (const [engine, create] of underTest(engines)) {
  test(
    `${engine}: export under a create/delete load is the store at one instant; writes committed while it is held mid-stream are not in it; import restores it exactly`,
    { timeout: 180_000 },
    async (t) => {
      const database = await create();
      t.after(() => database.drop());
      const env = { DATABASE_URL: database.url, RATE_LIMIT: 'off' };
      const other = database.open();
      t.after(() => other.close());
      await other.migrate();
      await other.insertBatch(seedPlants(SEEDED));
      const token = await mintCliToken(env, 'ops', 'plants:admin');
      const server = await startServer(env);
      t.after(() => server.stop());
      // The load deletes seeded plants from the lowest id up: never one of LATE_DELETES.
      const load = new WriteLoad(
        server.url,
        token,
        Array.from({ length: SEEDED - LATE_DELETES.length }, (_, i) => seedId(i)),
      );
      t.after(() => load.stop());

      await load.acknowledged(200);
      const before = load.acks.slice();
      const exporter = spawn(process.execPath, [BIN, 'export'], {
        env: { ...process.env, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      exporter.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
      const exited = once(exporter, 'exit');
      const chunks: Buffer[] = [];
      // Held mid-stream, deterministically: once its first bytes arrive the export has read its
      // first page (its snapshot is taken), and it cannot read its last page until the test reads
      // on: each page of 5,000 plants is over 1 MB, far more than the pipe and the paused stream hold.
      await new Promise<void>((resolve) => {
        exporter.stdout.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          if (chunks.length > 1) return;
          exporter.stdout.pause();
          resolve();
        });
      });
      await Promise.all([
        ...LATE_IDS.map((id) => other.createPlant({ id, owner: 'late', name: `late ${id}`, tag: null })),
        ...LATE_DELETES.map((id) => other.deletePlant(id, null)),
      ]);
      await load.acknowledged(load.acks.length + 100); // and the load goes on meanwhile
      exporter.stdout.resume();
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0, stderr);
      await load.stop();
      assert.deepEqual(load.failures, []);
      await server.stop();

      const text = Buffer.concat(chunks).toString('utf8');
      const plants = parseExport(text);
      const lines = stderr.trimEnd().split('\n');
      assert.match(lines[0]!, /^plant-store: database (sqlite:|postgres:\/\/)/);
      assert.equal(lines.at(-1), `Exported ${plants.size.toLocaleString('en-US')} plants.`);
      assert.deepEqual(
        LATE_IDS.filter((id) => plants.has(id)),
        [],
        'no plant created after the export began is in it',
      );
      assert.deepEqual(
        LATE_DELETES.filter((id) => !plants.has(id)),
        [],
        'no plant deleted after the export began is missing from it',
      );
      assert.deepEqual(missedWrites(before, plants), [], 'every write acknowledged before the export began is in it');
      const events = await allEvents(other);
      const instants = instantsOf(events, plants);
      assert.ok(instants.length > 0, 'the export matches the store at some instant of its log');
      const lateDeletes = new Set(LATE_DELETES.map((id) => `{"id":${id}}`));
      const firstLate = events.findIndex((e) => e.owner === 'late' || lateDeletes.has(e.payload));
      assert.ok(instants[0]! < firstLate, 'an instant before the late writes');
      assert.ok(
        [...plants.values()].some((key) => key.startsWith(`["${SEED_OWNER}"`)),
        'the seeded plants are there',
      );

      // Restored by import into a new database, then exported again: the same bytes.
      const file = join(dir, `export-${n++}.ndjson`);
      writeFileSync(file, text);
      const restoredPath = join(dir, `restored-${n++}.db`);
      const imported = await runCli(['import', file], { DATABASE_URL: `sqlite:${restoredPath}` });
      assert.equal(imported.code, 0, imported.stderr);
      const restored = openSqlite(restoredPath);
      t.after(() => restored.close());
      let again = '';
      const collect = new Writable({
        write(chunk: Buffer, _encoding, done) {
          again += chunk.toString();
          done();
        },
      });
      assert.equal(await exportPlants(restored, collect), plants.size);
      assert.ok(again === text, 'the import holds exactly the exported plants');
    },
  );

  test(`${engine}: exportPlants with small pages, its reader held between pages, sees none of the writes committed meanwhile`, async (t) => {
    const database = await create();
    t.after(() => database.drop());
    const store = database.open();
    const writer = database.open();
    t.after(() => Promise.all([store.close(), writer.close()]));
    await store.migrate();
    await store.insertBatch(
      Array.from({ length: 10 }, (_, i) => ({ id: BigInt(i * 10), owner: 'a', name: `p${i}`, tag: null })),
    );
    let text = '';
    let pages = 0;
    // A reader that takes each page only after the writes its predecessor caused have committed.
    const out = new Writable({
      write(chunk: Buffer, _encoding, done) {
        text += chunk.toString();
        pages += 1;
        const i = BigInt(pages);
        Promise.all([
          writer.createPlant({ id: 1000n + i, owner: 'late', name: `late ${i}`, tag: null }),
          writer.createPlant({ id: i * 10n + 5n, owner: 'late', name: `between ${i}`, tag: null }),
          writer.deletePlant(90n - i * 10n, null),
        ]).then(() => done(), done);
      },
      highWaterMark: 1, // every page waits for the previous one's writes
    });
    assert.equal(await exportPlants(store, out, undefined, { pageSize: 2 }), 10);
    assert.equal(pages, 5);
    assert.equal(text, Array.from({ length: 10 }, (_, i) => `{"id":${i * 10},"owner":"a","name":"p${i}"}\n`).join(''));
    const now = await (async () => {
      let count = 0;
      for await (const page of writer.snapshotPlants(100)) count += page.length;
      return count;
    })();
    assert.equal(now, 10 + 5 + 5 - 5, 'the writes did commit');
  });
}
