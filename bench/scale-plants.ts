// bench/scale.ts, axis `plants`: `plant-store import` of `n` generated plants (1,000 owners, 2 in 3
// tagged with one of 50 tags, as bench/import.ts makes them), the bytes on disk per plant, then the
// service on them: GET /plants of one owner (n/1,000 plants), its first page, a page deep in it
// (a cursor half-way) and a ?tag= page, p50; POST and DELETE, the service's CPU per request; RSS.
import { closeSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { cpuMsOf, percentile, rss } from './harness.js';
import { type Measure, type RunDb, call, cli, expectStatus, mint, serve, times } from './scale-kit.js';

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

export async function plantsAxis(db: RunDb, n: number, quick: boolean): Promise<Measure[]> {
  const plantId = plantIds(n);
  const file = join(db.dir, 'plants.ndjson');
  writePlants(file, n);
  const started = performance.now();
  cli(db, ['import', file]);
  const importS = (performance.now() - started) / 1000;
  if (db.engine === 'postgres') await db.sql('VACUUM ANALYZE');
  const bytes = await db.bytes();

  const token = mint(db, 'user7', 'plants:read,plants:write');
  const server = await serve(db);
  try {
    const pid = server.child.pid!;
    const get = async (path: string): Promise<number> => {
      const one = () => expectStatus(call(server.url, 'GET', path, token), 200);
      await one();
      return percentile(await times(quick ? 20 : 50, one), 50);
    };
    const mine = Math.floor(n / 1000); // user7's plants: i = 7, 1007, 2007, …
    const first = await get('/plants?limit=100');
    const deep = await get(`/plants?limit=100&cursor=${cursorAfter(plantId(7 + 1000 * Math.floor(mine / 2)))}`);
    const tagged = await get('/plants?limit=100&tag=tag7');
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
      { name: "GET /plants, an owner's first page of 100: p50", value: first, unit: 'ms', perOp: true },
      { name: 'a page half-way through (cursor): p50', value: deep, unit: 'ms', perOp: true },
      { name: '?tag= page: p50', value: tagged, unit: 'ms', perOp: true },
      { name: 'POST /plants: service CPU per request', value: postCpu, unit: 'µs', perOp: true },
      { name: 'DELETE /plants/{id}: service CPU per request', value: deleteCpu, unit: 'µs', perOp: true },
      { name: 'service RSS after', value: rss(pid), unit: 'MiB', perOp: true },
    ];
  } finally {
    await server.stop();
  }
}
