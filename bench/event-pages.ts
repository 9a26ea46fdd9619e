// The change feed as pages of JSON. Target: "the JSON feed reads ≥ 300,000
// events/s through pages of 1,000 on SQLite, one client in a loop". Run by bench/events.ts (and so
// by `npm run bench`) as its part `events-pages`, or alone, on SQLite:
//
//   npm run build && node --import tsx bench/event-pages.ts
//   BENCH_PAGES_EVENTS=200000 BENCH_PAGES_ROUNDS=10 node --import tsx bench/event-pages.ts
//   taskset -c 0 node --import tsx bench/event-pages.ts read    # the store's side alone, A/B (readAb)
//
// BENCH_PAGES_EVENTS events (default 200,000) are written by `plant-store import` while no server
// runs (one event per plant, all of one owner), then the service starts pinned to core 0. A client
// pinned to core 1 (a child process: one keep-alive connection) reads the whole log, as a poller
// would: GET /events with Accept: application/json and ?limit=BENCH_PAGES_LIMIT (default 1,000),
// each page's body read and parsed with JSON.parse, then the page its Link rel="next" names, until
// an empty page. One unrecorded read first (warm-up), then BENCH_PAGES_ROUNDS (default 10) reads,
// each timed from its first request to its empty page: events/s = events / that time. Twice: with
// the owner's token (plants:read: the read goes through the events_owner_id index) and with a
// plants:admin token (every plant's events: the primary key's range).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMsOf } from './kit/process.js';
import { cli, mintToken, startService } from './kit/server.js';
import { int, median } from './kit/stats.js';

const THIS = fileURLToPath(import.meta.url);
const EVENTS = Number(process.env.BENCH_PAGES_EVENTS ?? 200_000);
const ROUNDS = Number(process.env.BENCH_PAGES_ROUNDS ?? 10);
const LIMIT = Number(process.env.BENCH_PAGES_LIMIT ?? 1000);
const TARGET = 300_000;

export interface PagesResults {
  /** Rows of bench.ts's table: engine, scenario, then 7 cells. */
  readonly rows: string[];
  readonly notes: string[];
}

interface ClientArgs {
  readonly port: number;
  readonly token: string;
  readonly limit: number;
  readonly rounds: number;
}

interface ClientResult {
  /** Per round: events read, pages read, milliseconds. */
  readonly rounds: Array<{ events: number; pages: number; ms: number }>;
  /** Every round's pages, the warm-up's too, and the client's CPU time over them (ms). */
  readonly allPages: number;
  readonly cpuMs: number;
}

/** Runs the client on core 1 and answers what it measured. */
async function runClient(args: ClientArgs): Promise<ClientResult> {
  const child: ChildProcess = spawn('taskset', ['-c', '1', process.execPath, ...process.execArgv, THIS, 'client'], {
    env: { ...process.env, BENCH_ROLE: JSON.stringify(args) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`the pages client exited with ${code}`);
  return JSON.parse(out) as ClientResult;
}

/** The client: reads the whole feed `rounds + 1` times (the first unrecorded), page by page. */
async function client({ port, token, limit, rounds }: ClientArgs): Promise<ClientResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json' };
  const get = (path: string): Promise<{ body: string; link: string }> =>
    new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, headers, agent }, (res) => {
        res.setEncoding('utf8');
        let body = '';
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`GET ${path}: ${res.statusCode} ${body.slice(0, 200)}`));
          else resolve({ body, link: String(res.headers.link) });
        });
      });
      req.on('error', reject);
      req.end();
    });
  const result: ClientResult['rounds'] = [];
  const cpu = process.cpuUsage();
  let allPages = 0;
  for (let round = 0; round <= rounds; round++) {
    let path = `/events?limit=${limit}`;
    let events = 0;
    let pages = 0;
    const started = performance.now();
    for (;;) {
      const { body, link } = await get(path);
      const items = (JSON.parse(body) as unknown[]).length; // what a poller does with a page
      pages += 1;
      events += items;
      const next = /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
      if (next === undefined) throw new Error(`no Link rel="next": ${link}`);
      path = next;
      if (items === 0) break;
    }
    if (round > 0) result.push({ events, pages, ms: performance.now() - started });
    allPages += pages;
  }
  const used = process.cpuUsage(cpu);
  agent.destroy();
  return { rounds: result, allPages, cpuMs: (used.user + used.system) / 1000 };
}

/** The scenario on one engine; `env` has its DATABASE_URL (a fresh database: the import fills it). */
export async function pagesScenario(engine: string, env: NodeJS.ProcessEnv): Promise<PagesResults> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-pages-'));
  const rows: string[] = [];
  const notes: string[] = [];
  try {
    cli(['migrate'], env);
    const prefix = 7_000_000_000_000_000_000n + BigInt(Date.now() % 1_000_000) * 1_000_000n;
    let text = '';
    for (let i = 0; i < EVENTS; i++)
      text += `{"id":${prefix + BigInt(i)},"owner":"poller","name":"paged plant ${i}","tag":"bench"}\n`;
    writeFileSync(join(dir, 'plants.ndjson'), text);
    const imported = Date.now();
    cli(['import', join(dir, 'plants.ndjson')], env);
    notes.push(
      `${engine}: pages: imported ${int(EVENTS)} plants (and their events) in ${((Date.now() - imported) / 1000).toFixed(1)} s`,
    );
    const service = await startService(dir, { RATE_LIMIT: 'off', ...env }, { cores: '0' });
    try {
      for (const [who, token] of [
        ['the owner (plants:read)', mintToken(env, 'poller', 'plants:read')],
        ['plants:admin', mintToken(env, 'root', 'plants:admin')],
      ] as const) {
        const load = loadavg()[0]!.toFixed(2);
        const serverCpu = cpuMsOf(service.child.pid!);
        const { rounds, allPages, cpuMs } = await runClient({
          port: service.port,
          token,
          limit: LIMIT,
          rounds: ROUNDS,
        });
        const serverPerPage = (cpuMsOf(service.child.pid!) - serverCpu) / allPages;
        const clientPerPage = cpuMs / allPages;
        const rates = rounds.map((r) => (r.events / r.ms) * 1000);
        for (const r of rounds) if (r.events < EVENTS) throw new Error(`a read saw ${r.events} of ${EVENTS} events`);
        const perPage = rounds.map((r) => r.ms / r.pages);
        rows.push(
          `| ${engine} | GET /events as JSON, pages of ${int(LIMIT)}, ${int(EVENTS)} events, one client, ${who} (target ≥ ${int(TARGET)} events/s) | ${int(median(rates))} events/s | ${median(perPage).toFixed(2)} ms/page | — | — | — | — | — |`,
        );
        notes.push(
          `${engine}: pages, ${who}: events/s per round ${rates.map(int).join(', ')} (min ${int(Math.min(...rates))}, max ${int(Math.max(...rates))}); load average before ${load}; ` +
            `CPU per page: service ${serverPerPage.toFixed(2)} ms, client ${clientPerPage.toFixed(2)} ms`,
        );
        console.error(rows.at(-1));
        console.error(`  ${notes.at(-1)}`);
      }
    } finally {
      await service.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}

/**
 * `read`: the A/B of the store's side of a page, in this process (run it pinned: `taskset -c 0`):
 * A reads EventRecords (readEvents: an object and two bigints per row) and writes the page from
 * them, B reads EventRows (readEventRows: arrays, the id as text), what GET /events does. Rounds
 * alternate; each reads the whole log in pages of LIMIT.
 */
async function readAb(): Promise<void> {
  const { openSqlite } = await import('../src/store/sqlite/store.js');
  const { pageJson } = await import('../src/events/event-pages.js');
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-pages-ab-'));
  const store = openSqlite(join(dir, 'ab.db'));
  try {
    await store.migrate();
    const plants = Array.from({ length: EVENTS }, (_, i) => ({
      id: 7_000_000_000_000_000_000n + BigInt(i),
      owner: 'poller',
      name: `paged plant ${i}`,
      tag: 'bench',
    }));
    for (let i = 0; i < plants.length; i += 5000) await store.insertBatch(plants.slice(i, i + 5000));
    const viaRecords = async (after: bigint): Promise<[number, bigint]> => {
      const events = await store.readEvents(after, 'poller', LIMIT);
      pageJson(events.map((e) => [String(e.id), e.type, e.payload, e.createdAt] as const));
      return [events.length, events.at(-1)?.id ?? after];
    };
    const viaRows = async (after: bigint): Promise<[number, bigint]> => {
      const rows = await store.readEventRows(after, 'poller', LIMIT);
      pageJson(rows);
      return [rows.length, rows.length === 0 ? after : BigInt(rows[rows.length - 1]![0])];
    };
    const times: Record<'A' | 'B', number[]> = { A: [], B: [] };
    for (let round = 0; round < ROUNDS + 1; round++) {
      for (const [name, read] of [
        ['A', viaRecords],
        ['B', viaRows],
      ] as const) {
        const started = performance.now();
        let pages = 0;
        for (let after = 0n, n = 1; n > 0; pages++) [n, after] = await read(after);
        if (round > 0) times[name].push((performance.now() - started) / pages);
      }
    }
    console.log(`${cpus()[0]?.model}, node ${process.version}, ${new Date().toISOString()}`);
    for (const name of ['A', 'B'] as const) {
      const ms = times[name];
      console.log(
        `${name === 'A' ? 'A readEvents (records)' : 'B readEventRows (rows)'}: ms per page of ${LIMIT}, median ${median(ms).toFixed(3)}, per round ${ms.map((t) => t.toFixed(3)).join(', ')}`,
      );
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === THIS) {
  if (process.argv[2] === 'read') await readAb();
  else if (process.argv[2] === 'client') {
    const result = await client(JSON.parse(process.env.BENCH_ROLE ?? '{}') as ClientArgs);
    process.stdout.write(JSON.stringify(result));
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-pages-db-'));
    try {
      const started = new Date();
      const { rows, notes } = await pagesScenario('SQLite', { DATABASE_URL: `sqlite:${join(dir, 'pages.db')}` });
      console.log(`\n${cpus().length} × ${cpus()[0]?.model}, node ${process.version}, ${started.toISOString()}`);
      console.log('service pinned to core 0, the client to core 1; medians of the rounds\n');
      console.log('| engine | scenario | rate | per page | | | | | |');
      console.log('|---|---|---|---|---|---|---|---|---|');
      for (const row of rows) console.log(row);
      console.log('');
      for (const note of notes) console.log(`- ${note}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
