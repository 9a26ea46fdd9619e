// bench/scale.ts, axis `plants`: `plant-store import` of `n` generated plants (1,000 owners, 2 in 3
// tagged with one of 50 tags, as bench/import.ts makes them), the bytes on disk per plant, the
// plant count a /metrics scrape reads, then the service on them: pages of 100 of one owner's
// plants (n/1,000 of them, one in every 1,000 rows of the table), each asked once with a cursor of
// its own over ten owners (cold: neither the database's cache nor the service's page cache has
// it), the same with ?tag=, and one page asked again and again (warm), p50; POST and DELETE, the
// service's CPU per request; RSS.
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { cpuMsOf, rss } from './kit/process.js';
import { type Measure, type RunDb, call, cli, expectStatus, mint, serve, times } from './kit/scale.js';
import { percentile } from './kit/stats.js';

/** Ids spread over int64 whatever `n` (bench/import.ts's step overflows past 1.5 million). */
const plantIds = (n: number) => {
  const step = 9_000_000_000_000_000_000n / BigInt(n);
  return (i: number): bigint => BigInt(i) * step - 4_611_686_018_427_387_904n;
};
const cursorAfter = (id: bigint): string => Buffer.from(`p1:${id}`).toString('base64url');

/** `n` plants as NDJSON, in id order: plant i of user(i % 1000), tagged tag(i % 50) unless i % 3 = 0. */
export function writePlants(file: string, n: number): void {
  const plantId = plantIds(n);
  const fd = openSync(file, 'w');
  for (let from = 0; from < n; from += 100_000) {
    let chunk = '';
    for (let i = from; i < Math.min(n, from + 100_000); i++) {
      const tag = i % 3 ? `,"tag":"tag${i % 50}"` : '';
      chunk += `{"id":${plantId(i)},"owner":"user${i % 1000}","name":"plant number ${i}"${tag}}\n`;
    }
    writeSync(fd, chunk);
  }
  closeSync(fd);
}

/** The owners whose pages are read cold: user(o) holds plants i = o, o + 1000, o + 2000, … */
const COLD_OWNERS = [7, 107, 207, 307, 407, 507, 607, 707, 807, 907];
/**
 * Cold pages read per owner, each from the start of a stretch of its own. At 1,000,000 plants an
 * owner holds 1,000 (667 tagged): 5 stretches of 200 (133 tagged) keep pages of 100 from
 * overlapping, with a tag or without, at every size from there up.
 */
const COLD_PAGES = 5;

/** The store's plant count (what a /metrics scrape reads), p50 of `runs` calls. */
async function countCost(db: RunDb, n: number, runs: number): Promise<number> {
  const store = await db.openStore();
  try {
    return percentile(
      await times(runs, async () => {
        const count = await store.countPlants();
        if (count !== n) throw new Error(`countPlants answered ${count}, not ${n}`);
      }),
      50,
    );
  } finally {
    await store.close();
  }
}

export async function plantsAxis(db: RunDb, n: number, quick: boolean): Promise<Measure[]> {
  const plantId = plantIds(n);
  const file = join(db.dir, 'plants.ndjson');
  writePlants(file, n);
  const started = performance.now();
  cli(db, ['import', file]);
  const importS = (performance.now() - started) / 1000;
  if (db.engine === 'postgres') await db.sql('VACUUM ANALYZE');
  const bytes = await db.bytes();
  const countMs = await countCost(db, n, 20);

  const tokens = new Map(COLD_OWNERS.map((o) => [o, mint(db, `user${o}`, 'plants:read,plants:write')]));
  const token = tokens.get(7)!;
  const server = await serve(db);
  try {
    const pid = server.child.pid!;
    const get = (path: string, as = token) => expectStatus(call(server.url, 'GET', path, as), 200);
    const warm = async (path: string): Promise<number> => {
      await get(path);
      return percentile(await times(quick ? 20 : 50, () => get(path)), 50);
    };
    // Each owner's plants split into COLD_PAGES stretches; a page is read from the start of each,
    // owners interleaved, so that no request reads what an earlier one did.
    const mine = Math.floor(n / 1000);
    const cold = async (query: string): Promise<number> => {
      const ms: number[] = [];
      for (let k = 0; k < COLD_PAGES; k++)
        for (const o of COLD_OWNERS) {
          const at = o + 1000 * Math.floor((k * mine) / COLD_PAGES);
          const cursor = k === 0 ? '' : `&cursor=${cursorAfter(plantId(at))}`;
          ms.push((await get(`/plants?limit=100${query}${cursor}`, tokens.get(o))).ms);
        }
      return percentile(ms, 50);
    };
    const coldPage = await cold('');
    const coldTagged = await cold('&tag=tag7'); // user o's tagged plants all carry tag(o % 50)
    const first = await warm('/plants?limit=100');
    const count = quick ? 200 : 1000;
    let cpu = cpuMsOf(pid);
    for (let i = 0; i < count; i++)
      await expectStatus(
        call(server.url, 'POST', '/plants', token, JSON.stringify({ id: 1e12 + i, name: `new ${i}` })),
        200,
      );
    const postCpu = ((cpuMsOf(pid) - cpu) / count) * 1000;
    cpu = cpuMsOf(pid);
    for (let i = 0; i < count; i++) await expectStatus(call(server.url, 'DELETE', `/plants/${1e12 + i}`, token), 204);
    const deleteCpu = ((cpuMsOf(pid) - cpu) / count) * 1000;
    return [
      { name: '`plant-store import`: wall time', value: importS, unit: 's', perOp: false },
      { name: 'import rate', value: n / importS, unit: 'plants/s', perOp: true },
      { name: 'database per plant (its event included)', value: bytes / n, unit: 'B', perOp: true },
      { name: 'plant count of a /metrics scrape (the store read): p50', value: countMs, unit: 'ms', perOp: true },
      { name: "GET /plants, a page of 100 of an owner's, cold: p50", value: coldPage, unit: 'ms', perOp: true },
      { name: 'a ?tag= page of 100, cold: p50', value: coldTagged, unit: 'ms', perOp: true },
      { name: 'the same first page again and again (warm): p50', value: first, unit: 'ms', perOp: true },
      { name: 'POST /plants: service CPU per request', value: postCpu, unit: 'µs', perOp: true },
      { name: 'DELETE /plants/{id}: service CPU per request', value: deleteCpu, unit: 'µs', perOp: true },
      { name: 'service RSS after', value: rss(pid), unit: 'MiB', perOp: true },
    ];
  } finally {
    await server.stop();
  }
}
