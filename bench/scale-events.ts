// bench/scale.ts, axis `events`: `n` events in the log, made over 8 days (so that with the default
// retention of 7 days one day's worth, n/8, is past it), of 100 owners. JSON pages at the oldest,
// the middle and the newest, each asked once; SSE streams resumed from old ids; then pruning that day as the
// service's pruner does at its start (batches of 1,000, a turn of the event loop between), POST
// p99 during it (from the service's "listening" to its "pruned" log line) against
// without, and what the database does with the space: its size before, after, and after a day's
// worth is written again.
import { readFileSync, readdirSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { type Measure, type RunDb, call, expectStatus, mint, serve } from './kit/scale.js';
import { percentile } from './kit/stats.js';
import { seedEvents } from './scale-deliveries.js';

const DAY = 86_400_000;
const PAGE = 100;

/** Opens the stream after `after` and answers the ms until `count` events have arrived. */
function resume(url: string, token: string, after: number, count: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(`${url}/events?after=${after}`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) reject(new Error(`the stream answered ${res.statusCode}`));
      let seen = 0;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        seen += chunk.split('\nid: ').length - 1 + (chunk.startsWith('id: ') ? 1 : 0);
        if (seen >= count) {
          resolve(performance.now() - started);
          req.destroy();
        }
      });
    });
    req.on('error', (e) => (e.message === 'socket hang up' ? undefined : reject(e)));
    req.end();
  });
}

async function postTimes(
  url: string,
  token: string,
  from: number,
  until: () => boolean,
  max = 2000,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; out.length < max && !until(); i++) {
    const a = await expectStatus(
      call(url, 'POST', '/plants', token, JSON.stringify({ id: from + i, name: `new plant ${i}` })),
      200,
    );
    out.push(a.ms);
  }
  return out;
}

async function freeBytes(db: RunDb): Promise<number> {
  if (db.engine === 'sqlite') {
    const [row] = await db.sql('SELECT freelist_count * page_size AS b FROM pragma_freelist_count, pragma_page_size');
    return Number(row!.b);
  }
  return 0;
}

export async function eventsAxis(db: RunDb, n: number): Promise<Measure[]> {
  const now = Date.now();
  await seedEvents(db, n, `'owner' || (i % 100)`, 8 * DAY, now);
  if (db.engine === 'postgres') await db.sql('VACUUM ANALYZE events');
  const admin = mint(db, 'root', 'plants:admin');
  const owner = mint(db, 'owner7', 'plants:read');
  const writer = mint(db, 'writer', 'plants:read,plants:write');
  const out: Measure[] = [];
  let server = await serve(db, { EVENT_RETENTION: '30d' });
  let idle: number[];
  try {
    // Each page asked once (cold), from its own `after`: 30 pages `step` events apart from `from`
    // (backwards when `step` is negative), none overlapping another.
    const pages = async (token: string, from: number, step: number): Promise<number> => {
      const ms: number[] = [];
      for (let k = 0; k < 30; k++) {
        const path = `/events?after=${from + k * step}&limit=${PAGE}`;
        ms.push(
          (await expectStatus(call(server.url, 'GET', path, token, undefined, { accept: 'application/json' }), 200)).ms,
        );
      }
      return percentile(ms, 50);
    };
    const step = Math.max(PAGE, Math.floor(n / 1000));
    for (const [where, from, by] of [
      ['the oldest', 0, step],
      ['the middle', Math.floor(n / 2), step],
      ['the newest', n - PAGE, -step],
    ] as const)
      out.push({
        name: `JSON page of ${PAGE} at ${where}, plants:admin, cold: p50`,
        value: await pages(admin, from, by),
        unit: 'ms',
        perOp: true,
      });
    out.push({
      name: `JSON page an eighth in, one owner's (1 in 100), cold: p50`,
      value: await pages(owner, Math.floor(n / 8), PAGE * 100), // an owner's page spans 100 × PAGE events
      unit: 'ms',
      perOp: true,
    });
    // Each resume from a place of its own, after the owner's pages and before the middle's: 1,000
    // events that no request before read, at every size (at 1,000,000 events the owner's pages end
    // at 425,000, the resumes start at 480,000).
    const resumes: number[] = [];
    const gap = 2 * Math.min(1000, Math.floor(n / 100));
    for (let i = 0; i < 6; i++) resumes.push(await resume(server.url, admin, Math.floor(n / 2) - (10 - i) * gap, 1000));
    out.push({
      name: 'SSE resumed from an old id: time to 1,000 events, cold, p50',
      value: percentile(resumes.slice(1), 50),
      unit: 'ms',
      perOp: true,
    });
    idle = await postTimes(server.url, writer, 1e12, () => false, 400);
  } finally {
    await server.stop();
  }

  // Pruning the day past the 7 days: the service's own pruner, which starts with it, while a client POSTs.
  const before = await db.bytes();
  server = await serve(db, { EVENT_RETENTION: '7d' });
  try {
    const log = (): string => {
      const files = readdirSync(db.dir).filter((f) => f.startsWith('child-') && f.endsWith('.log'));
      return files.map((f) => readFileSync(join(db.dir, f), 'utf8')).join('');
    };
    const pruned = (): { time: number; rows: number } | undefined => {
      const line = log()
        .split('\n')
        .find((l) => l.includes('pruned events and delivery records'));
      return line === undefined ? undefined : (JSON.parse(line) as { time: number; rows: number });
    };
    const listening = log()
      .split('\n')
      .find((l) => l.includes('Server listening'));
    const during = await postTimes(server.url, writer, 2e12, () => pruned() !== undefined, 100_000);
    const done = pruned()!;
    const pruneMs = done.time - (JSON.parse(listening!) as { time: number }).time;
    if (Math.abs(done.rows - n / 8) > n / 100) throw new Error(`pruned ${done.rows} of ${n / 8}`);
    const afterPrune = await db.bytes();
    const free = await freeBytes(db);
    await db.sql(
      `INSERT INTO events (type, owner, plant_id, payload, created_at)
       SELECT 'plant.created', 'owner' || (i % 100), 8000000000000000000 + i, '{"id":' || (8000000000000000000 + i) || ',"name":"plant ' || i || '","tag":"scale"}', ${now}
       FROM (${db.series(done.rows)}) AS t`,
    );
    const rewritten = await db.bytes();
    out.push(
      { name: 'POST p99, nothing pruning', value: percentile(idle, 99), unit: 'ms', perOp: true },
      {
        name: `POST p99 while a day's worth is pruned (${during.length} POSTs)`,
        value: percentile(during, 99),
        unit: 'ms',
        perOp: true,
      },
      { name: "pruning a day's worth (n/8 events): duration", value: pruneMs / 1000, unit: 's', perOp: false },
      { name: 'pruning: per event', value: (pruneMs / done.rows) * 1000, unit: 'µs', perOp: true },
      { name: 'database before pruning: per event kept', value: before / n, unit: 'B', perOp: true },
      {
        name: 'free after pruning (SQLite freelist; PostgreSQL: 0, dead rows wait for autovacuum)',
        value: free / 2 ** 20,
        unit: 'MiB',
        perOp: false,
      },
      {
        name: 'growth of the database after a day is pruned and a day written again',
        value: ((rewritten - before) / before) * 100,
        unit: '%',
        perOp: false,
      },
      { name: 'its size right after pruning ÷ before', value: afterPrune / before, unit: '×', perOp: true },
    );
  } finally {
    await server.stop();
  }
  return out;
}
