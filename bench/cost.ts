// Per-request cost: server CPU per request of the service against bare node:http
// answering the same bytes (bench/bare-server.mjs), for GET /plants?limit=10, POST /plants and
// DELETE /plants/{id}, on SQLite and PostgreSQL; on SQLite also against a minimal Fastify app with
// the service's statements, durability, event rows and page cache and nothing else
// (bench/minimal-fastify.mjs): what the framework itself costs, and what the service adds to it;
// and, on both engines, against the parts every request keeps (store, token check, request id, log line,
// metrics, entity tag) on bare node:http with no framework (bench/kept-parts.mjs): the ratio no
// hand-written HTTP layer could beat.
// Run by `npm run bench` (its last table; BENCH_SKIP=cost leaves it out), alone by
// `npm run bench -- --quick`, or directly:
//
//   node --import tsx bench/cost.ts            # 3 rounds of 5 s per row
//   node --import tsx bench/cost.ts --quick    # 2 rounds of 2 s: about 80 s, while changing code
//   BENCH_KEPT=1 node --import tsx bench/cost.ts --quick   # with the kept-parts column: about 110 s
//   BENCH_KEPT_OFF=log,metrics,auth,id node --import tsx bench/cost.ts   # that column with parts left out
//   BENCH_SKIP=postgres node --import tsx bench/cost.ts
//   BENCH_KNOCKOUTS=1 node --import tsx bench/cost.ts   # also the rows with a part switched off
//
// The servers run side by side, pinned to core 0; wrk -t1 -c50 on core 1 loads one at a time,
// alternating (service, bare, minimal, kept parts, service, …). A row's cost is the server's CPU
// time (user + system, /proc/<pid>/stat) over the run divided by the requests answered; its ratios
// are bare over service, minimal over service and bare over kept parts, each the median of the
// rounds' ratios. The
// creates of a round are deleted by the next DELETE round, id for id, so every DELETE finds its
// plant and answers 204.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PARTS } from '../src/knockouts.js';
import { cpuMsOf, exitOnSignal, loadAverage } from './kit/process.js';
import { type Server, mintToken, onBenchPostgres, start, startService } from './kit/server.js';
import { median } from './kit/stats.js';
import { wrk } from './kit/wrk.js';

const BARE = fileURLToPath(new URL('./bare-server.mjs', import.meta.url));
const MINIMAL = fileURLToPath(new URL('./minimal-fastify.mjs', import.meta.url));
const KEPT = fileURLToPath(new URL('./kept-parts.mjs', import.meta.url));
const QUICK = process.argv.includes('--quick');
const SECONDS = Number(process.env.BENCH_COST_SECONDS ?? (QUICK ? 2 : 5)); // whole seconds: wrk's -d
const ROUNDS = Number(process.env.BENCH_COST_ROUNDS ?? (QUICK ? 2 : 3));
/** The kept-parts server: in every full run; in a quick one only with BENCH_KEPT=1 (it adds about 25 s). */
const WITH_KEPT = !QUICK || process.env.BENCH_KEPT === '1';
const SKIP = new Set((process.env.BENCH_SKIP ?? '').split(',').filter(Boolean));
const SERVER_ENV = { PORT: '0', RATE_LIMIT: 'off' };
/** The bare, minimal and kept-parts servers' line once they listen. */
const LISTENING = /listening (\d+)/;

/** wrk's Lua for each operation; POST and DELETE walk the same ids, `<prefix><n as 9 digits>`. */
function script(dir: string, op: 'get' | 'post' | 'delete', token: string, prefix: string, last = 0): string {
  const file = join(dir, `${op}-${prefix}.lua`);
  const head = `wrk.headers["Authorization"] = "Bearer ${token}"\nlocal n = 0\n`;
  const body = {
    get: '',
    post:
      `wrk.headers["Content-Type"] = "application/json"\n` +
      `request = function()\n  n = n + 1\n  return wrk.format("POST", "/plants", nil, '{"id":${prefix}' .. string.format("%09d", n) .. ',"name":"bench plant","tag":"shade"}')\nend\n`,
    // Ids 1 to `last` (what the POST round made), stopping while 50 connections' worth are left.
    delete:
      `request = function()\n  n = n + 1\n  return wrk.format("DELETE", "/plants/${prefix}" .. string.format("%09d", n))\nend\n` +
      `local answered = 0\nresponse = function()\n  answered = answered + 1\n  if answered >= ${last - 60} then wrk.thread:stop() end\nend\n`,
  }[op];
  writeFileSync(file, head + body);
  return file;
}

interface Measured {
  requests: number;
  rps: number;
  usPerRequest: number;
}

async function measure(server: Server, lua: string, path: string, seconds = SECONDS): Promise<Measured> {
  const before = cpuMsOf(server.child.pid!);
  const result = await wrk(`${server.url}${path}`, lua, seconds);
  const used = cpuMsOf(server.child.pid!) - before;
  return { requests: result.requests, rps: result.rps, usPerRequest: (used * 1000) / result.requests };
}

export interface CostRow {
  engine: string;
  op: string;
  service: number;
  bare: number;
  ratio: number;
  rpsRatio: number;
  /** The minimal Fastify app's CPU µs/req, and its ratio to the service's: undefined off SQLite. */
  minimal: number | undefined;
  minimalRatio: number | undefined;
  /** bench/kept-parts.mjs's CPU µs/req, and bare over it: the ratio no HTTP layer with those parts could beat. */
  kept: number | undefined;
  keptRatio: number | undefined;
}

/**
 * One engine's rows: the service as configured by `env` against the bare server and, when `env`
 * names a SQLite database, the minimal Fastify app on a SQLite file of its own.
 */
export async function costRows(engine: string, env: NodeJS.ProcessEnv, label = ''): Promise<CostRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-cost-'));
  const servers: Server[] = [];
  try {
    const serviceEnv = { ...SERVER_ENV, ...env };
    const token = mintToken(serviceEnv, 'bench', 'plants:read,plants:write', { showStderr: true });
    const service = await startService(dir, serviceEnv, { cores: '0' });
    servers.push(service);
    // Ten plants to list, and the bodies the bare server answers with: the service's own bytes.
    const call = async (path: string, init: RequestInit = {}, server = service): Promise<string> =>
      (
        await fetch(`${server.url}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        })
      ).text();
    /** Plants 1 to 10, made through `server`'s API; answers the last one's body. */
    const tenPlants = async (server: Server): Promise<string> => {
      let created = '';
      for (let i = 1; i <= 10; i++)
        created = await call(
          '/plants',
          { method: 'POST', body: `{"id":${i},"name":"plant ${i}","tag":"shade"}` },
          server,
        );
      return created;
    };
    const created = await tenPlants(service);
    const bodies = { list10: await call('/plants?limit=10'), created };
    const bare = await start(dir, [BARE], {
      env: { BARE_BODIES: JSON.stringify(bodies), PORT: '0' },
      cores: '0',
      ready: LISTENING,
    });
    servers.push(bare);
    // The same token, the same ten plants made the same way, the service's event rows and page
    // cache: the same work in SQLite, so that what differs is the framework and the service's parts.
    let minimal: Server | undefined;
    if (env.DATABASE_URL?.startsWith('sqlite:')) {
      const minimalEnv = {
        DATABASE_PATH: join(dir, 'minimal.db'),
        PORT: '0',
        TOKEN: token,
        MINIMAL_EVENTS: '1',
        MINIMAL_PAGE_CACHE: '1',
      };
      minimal = await start(dir, [MINIMAL], { env: minimalEnv, cores: '0', ready: LISTENING });
      servers.push(minimal);
      await tenPlants(minimal);
    }
    // The service's parts every request keeps, on bare node:http: on SQLite a file of its own, with
    // the service's tokens copied in; on PostgreSQL the service's database, its ten plants and tokens.
    const sqliteFile = env.DATABASE_URL?.startsWith('sqlite:') ? env.DATABASE_URL.slice('sqlite:'.length) : undefined;
    const keptEnv: NodeJS.ProcessEnv =
      sqliteFile === undefined
        ? { ...serviceEnv }
        : { ...serviceEnv, DATABASE_URL: `sqlite:${join(dir, 'kept.db')}`, TOKENS_FROM: sqliteFile };
    // BENCH_KEPT_OFF=log,metrics,auth,id,store: the kept-parts server without those (its KEPT_OFF).
    if (process.env.BENCH_KEPT_OFF) keptEnv.KEPT_OFF = process.env.BENCH_KEPT_OFF;
    const kept = WITH_KEPT ? await start(dir, [KEPT], { env: keptEnv, cores: '0', ready: LISTENING }) : undefined;
    if (kept !== undefined) servers.push(kept);
    if (kept !== undefined && sqliteFile !== undefined) await tenPlants(kept);
    const contenders = [
      ['service', service],
      ['bare', bare],
      ...(minimal === undefined ? [] : [['minimal', minimal] as const]),
      ...(kept === undefined ? [] : [['kept', kept] as const]),
    ] as const;

    // Steady state: a few seconds of every operation first, unrecorded, on each.
    let run = 0;
    const prefix = (): string => `8${String(Date.now() % 1e6).padStart(6, '0')}${String(++run).padStart(3, '0')}`;
    /** A POST round, then a DELETE round over its ids that stops before running out of them. */
    const postThenDelete = async (server: Server, ids: string, seconds: number): Promise<[Measured, Measured]> => {
      const posted = await measure(server, script(dir, 'post', token, ids), '/', seconds);
      return [posted, await measure(server, script(dir, 'delete', token, ids, posted.requests), '/', seconds)];
    };
    for (const [, server] of contenders) {
      const warm = prefix();
      await measure(server, script(dir, 'get', token, warm), '/plants?limit=10', QUICK ? 1 : 2);
      await postThenDelete(server, warm, QUICK ? 1 : 2);
    }

    const rows: CostRow[] = [];
    const results: Record<string, Record<(typeof contenders)[number][0], Measured[]>> = {
      GET: { service: [], bare: [], minimal: [], kept: [] },
      POST: { service: [], bare: [], minimal: [], kept: [] },
      DELETE: { service: [], bare: [], minimal: [], kept: [] },
    };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, server] of contenders) {
        const ids = prefix();
        results.GET![name].push(await measure(server, script(dir, 'get', token, ids), '/plants?limit=10'));
        const [posted, deleted] = await postThenDelete(server, ids, SECONDS);
        results.POST![name].push(posted);
        results.DELETE![name].push(deleted);
      }
    }
    for (const [op, { service: s, bare: b, minimal: f, kept: k }] of Object.entries(results)) {
      const ratios = s.map((m, i) => b[i]!.usPerRequest / m.usPerRequest);
      const rpsRatios = s.map((m, i) => m.rps / b[i]!.rps);
      const ran = f.length > 0;
      rows.push({
        engine: `${engine}${label}`,
        op,
        service: median(s.map((m) => m.usPerRequest)),
        bare: median(b.map((m) => m.usPerRequest)),
        ratio: median(ratios),
        rpsRatio: median(rpsRatios),
        minimal: ran ? median(f.map((m) => m.usPerRequest)) : undefined,
        minimalRatio: ran ? median(s.map((m, i) => f[i]!.usPerRequest / m.usPerRequest)) : undefined,
        kept: k.length > 0 ? median(k.map((m) => m.usPerRequest)) : undefined,
        keptRatio: k.length > 0 ? median(k.map((m, i) => b[i]!.usPerRequest / m.usPerRequest)) : undefined,
      });
    }
    return rows;
  } finally {
    for (const server of servers) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The parts switched off one at a time (src/knockouts.ts's PLANT_STORE_KNOCKOUT, with the
 * PLANT_STORE_BENCHMARK=1 a server wants beside it, or a setting), each a row of its own
 * (BENCH_KNOCKOUTS=1): what the part costs is the difference from the row with everything on.
 * BENCH_KNOCKOUTS=request-log,event-log runs only those.
 */
const KNOCKOUTS: Array<[string, NodeJS.ProcessEnv]> = [
  ...PARTS.map((part): [string, NodeJS.ProcessEnv] => [
    `${part} off`,
    { PLANT_STORE_KNOCKOUT: part, PLANT_STORE_BENCHMARK: '1' },
  ]),
  ['overload guard off (MAX_EVENT_LOOP_DELAY=off)', { MAX_EVENT_LOOP_DELAY: 'off' }],
  ['CORS on (CORS_ORIGINS set)', { CORS_ORIGINS: 'https://app.example' }],
];

export function costTable(rows: CostRow[]): string {
  const us = (n: number): string => n.toFixed(1);
  const or = (n: number | undefined, show: (n: number) => string): string => (n === undefined ? '—' : show(n));
  return [
    '| engine | request | service CPU µs/req | bare CPU µs/req | bare/service (CPU) | service/bare (req/s) | minimal Fastify CPU µs/req | minimal/service (CPU) | kept parts on node:http CPU µs/req | bare/kept parts (CPU) |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.engine} | ${r.op} | ${us(r.service)} | ${us(r.bare)} | ${r.ratio.toFixed(2)} | ${r.rpsRatio.toFixed(2)} | ${or(r.minimal, us)} | ${or(r.minimalRatio, (n) => n.toFixed(2))} | ${or(r.kept, us)} | ${or(r.keptRatio, (n) => n.toFixed(2))} |`,
    ),
  ].join('\n');
}

/** The cost table alone: `npm run bench -- --quick`, or this file run directly. */
export async function main(): Promise<void> {
  exitOnSignal();
  const started = new Date();
  const rows: CostRow[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-cost-db-'));
  let n = 0;
  const sqlite = (): NodeJS.ProcessEnv => ({ DATABASE_URL: `sqlite:${join(dir, `cost-${++n}.db`)}` });
  try {
    if (!SKIP.has('sqlite')) {
      rows.push(...(await costRows('SQLite', sqlite())));
      const wanted = process.env.BENCH_KNOCKOUTS;
      if (wanted)
        for (const [name, env] of KNOCKOUTS)
          if (wanted === '1' || wanted.split(',').some((part) => name.startsWith(part)))
            rows.push(...(await costRows('SQLite', { ...sqlite(), ...env }, `, ${name}`)));
    }
    if (!SKIP.has('postgres'))
      rows.push(
        ...(await onBenchPostgres(async (url) => {
          const { default: pg } = await import('pg');
          const client = new pg.Client({ connectionString: url });
          await client.connect();
          // A database of its own, so that the plants of other runs cost nothing here.
          const name = `plant_store_cost_${process.pid}`;
          await client.query(`DROP DATABASE IF EXISTS ${name}`);
          await client.query(`CREATE DATABASE ${name}`);
          await client.end();
          const own = new URL(url);
          own.pathname = `/${name}`;
          try {
            return await costRows('PostgreSQL', { DATABASE_URL: own.toString() });
          } finally {
            const admin = new pg.Client({ connectionString: url });
            await admin.connect();
            await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
            await admin.end();
          }
        })),
      );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${started.toISOString()}, load ${loadAverage()}`,
  );
  console.log(
    `server CPU per request (user + system of the server process over the run / requests answered); all servers on core 0, wrk -t1 -c50 on core 1; ${ROUNDS} alternating rounds of ${SECONDS} s, medians\n`,
  );
  console.log(costTable(rows));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
