import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDatabaseUrl } from '../src/config.js';
import { knockOut } from '../src/knockouts.js';
import { openStore } from '../src/store/open-store.js';
import type { Store } from '../src/store/store.js';

/**
 * The storage floor of a request: the CPU this process spends per create, list and delete
 * in the store alone, with no HTTP in front: the same statements, the event row in the same
 * transaction, the same group commit and (SQLite) the same WAL + synchronous=FULL commit, 50 calls
 * in flight at once as wrk's 50 connections keep them. A request can cost no less than this plus
 * what node:http costs to answer it (the bare server), which bounds the bare/service ratio a write
 * can reach with durability unchanged.
 *
 * Usage: node --import tsx bench/storage-floor.ts [sqlite | postgres://…] (default: a SQLite file
 * in a temporary folder). BENCH_FLOOR_SECONDS (default 3) per operation; PLANT_STORE_KNOCKOUT
 * (src/knockouts.ts: event-log, group-commit) switches those parts of the store off.
 */

const SECONDS = Number(process.env.BENCH_FLOOR_SECONDS ?? 3);
const IN_FLIGHT = 50;

function cpuMicros(): number {
  const { user, system } = process.cpuUsage();
  return user + system;
}

/** Runs `op(i)` with IN_FLIGHT calls in flight for SECONDS; answers CPU µs per call. */
async function measure(op: (i: number) => Promise<unknown>, start: number): Promise<{ calls: number; micros: number }> {
  let next = start;
  const until = Date.now() + SECONDS * 1000;
  const cpu = cpuMicros();
  const lane = async (): Promise<void> => {
    while (Date.now() < until) await op(next++);
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  const calls = next - start;
  return { calls, micros: (cpuMicros() - cpu) / calls };
}

async function main(): Promise<void> {
  const given = process.argv[2];
  const folder = given?.startsWith('postgres') ? undefined : mkdtempSync(join(tmpdir(), 'plant-store-floor-'));
  const url = folder === undefined ? given! : `sqlite:${join(folder, 'floor.db')}`;
  // A benchmark by definition: the knock-outs need no PLANT_STORE_BENCHMARK=1 here.
  const off = knockOut({ ...process.env, PLANT_STORE_BENCHMARK: '1' });
  if (off.length > 0) console.log(`knocked out: ${off.join(', ')}`);
  const store: Store = await openStore(parseDatabaseUrl(url), {
    sqlite: { locks: 'event-loop' },
  });
  try {
    await store.migrate();
    const base = BigInt(Date.now()) * 1_000_000n; // ids of this run only, on a shared database too
    // Warm-up: statements prepared, pages in the cache.
    await measure((i) => store.createPlant({ id: base - BigInt(i) - 1n, owner: 'floor', name: 'warm', tag: null }), 0);
    const created = await measure(
      (i) => store.createPlant({ id: base + BigInt(i), owner: 'floor', name: 'bench plant', tag: 'shade' }),
      0,
    );
    const listed = await measure(() => store.listPlants({ owner: 'floor', tag: null, fromId: base, limit: 11 }), 0);
    const deleted = await measure((i) => store.deletePlant(base + BigInt(i), 'floor'), 0);
    const engine = folder === undefined ? 'PostgreSQL' : 'SQLite';
    console.log(`${engine} create: ${created.micros.toFixed(1)} µs CPU per call (${created.calls} calls)`);
    console.log(`${engine} list (a page of 10): ${listed.micros.toFixed(1)} µs CPU per call (${listed.calls} calls)`);
    console.log(`${engine} delete: ${deleted.micros.toFixed(1)} µs CPU per call (${deleted.calls} calls)`);
  } finally {
    await store.close();
    if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
  }
}

await main();
