// npm run bench — the service against the platform's own limit, side by side.
//
// Starts the service (SQLite in a temporary file, rate limiting off; then PostgreSQL) and a bare
// node:http server answering the same bytes, each pinned to core 0, and drives both with wrk pinned
// to core 1 (50 connections), alternating A/B, after a warm-up. Any error or non-2xx answer fails the run.
// Settings: BENCH_DURATION (seconds per run, default 10), BENCH_ROUNDS (default 2),
// BENCH_DATABASE_URL (PostgreSQL to use; default: a throwaway embedded server),
// BENCH_SKIP=sqlite,postgres,api,compression,scale,workers,events,cost (api: the five GET/POST/DELETE/mix rows;
// compression: the 100-plant page with and without gzip, a poll answered 304, bytes on the wire).
// The event side's scenarios (webhooks, the change feed) are bench/events.ts, run after each engine's own,
// and last bench/cost.ts (cost: server CPU per request against bare node:http). `npm run bench -- --quick`
// runs that last table alone, in under 90 s. `npm run bench -- --fairness [--engine postgres]
// [--checkout <dir>]` runs bench/fairness.ts alone (a healthy webhook beside 20 hanging ones).
// `npm run bench -- --silent-primary [--runs N] [--only partition|freeze]` runs bench/silent-primary.ts
// alone (a primary gone silent under the service, its synchronous standby promoted 3 s later).
// `npm run bench -- --fleet-writes [--seconds S] [--rounds N] [--pgbench]` runs bench/fleet-writes.ts
// alone (one instance × 32 writers against two × 16, under a synchronous standby 3 ms away).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus, totalmem, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CostRow, costRows, costTable, main as costOnly } from './cost.js';
import { eventScenarios } from './events.js';
import { main as fairnessOnly } from './fairness.js';
import { main as fleetWritesOnly } from './fleet-writes.js';
import { exitOnSignal, rss, sleep } from './kit/process.js';
import { type Server, cli as run, mintToken, onBenchPostgres, start, startService as serve } from './kit/server.js';
import { int } from './kit/stats.js';
import { DURATION, type WrkResult as Result, combine, wrk } from './kit/wrk.js';
import { main as silentPrimaryOnly } from './silent-primary.js';

const BARE = fileURLToPath(new URL('./bare-server.mjs', import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const WARM_UP = 3; // seconds of unrecorded load after a server starts
const SKIP = new Set((process.env.BENCH_SKIP ?? '').split(',').filter(Boolean));
const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-'));

// SIGINT or SIGTERM ends the run through process.exit, which stops what it started (kit/process.ts).
exitOnSignal();

function ensureWrk(): void {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return; // wrk --version exits 1 but exists
    console.error('wrk is not installed; installing it from Debian packages (apt-get install wrk)');
    execFileSync('apt-get', ['install', '-y', 'wrk'], { stdio: 'inherit' });
  }
}

/** The service pinned to `cores`, RATE_LIMIT=off; a start slower than 5 minutes fails the run. */
const startService = (env: NodeJS.ProcessEnv, cores = '0', args: string[] = []): Promise<Server> =>
  serve(dir, { RATE_LIMIT: 'off', ...env }, { cores, args, timeoutMs: 300_000 });

/** The CLI's stderr (the database it uses, the migrations applied) shows on this process's. */
const cli = (args: string[], env: NodeJS.ProcessEnv): string => run(args, env, { showStderr: true });

/** Lua for wrk: the request of each scenario. Ids are unique per run, so no create is a 409. */
function script(
  kind: 'get' | 'post' | 'delete' | 'mix',
  token: string,
  base: bigint,
  headers: Record<string, string> = {},
): string {
  const file = join(dir, `${kind}-${base}-${Object.keys(headers).join('-')}.lua`);
  let head = `wrk.headers["Authorization"] = "Bearer ${token}"\nwrk.headers["Content-Type"] = "application/json"\nlocal n = 0\n`;
  for (const [name, value] of Object.entries(headers))
    head += `wrk.headers[${JSON.stringify(name)}] = ${JSON.stringify(value)}\n`;
  const post = `n = n + 1\n  return wrk.format("POST", "/plants", nil, '{"id":' .. (${base} + n) .. ',"name":"bench plant"}')`;
  const body = {
    get: '',
    post: `request = function()\n  ${post}\nend\n`,
    delete: `request = function()\n  n = n + 1\n  return wrk.format("DELETE", "/plants/" .. (${base} + n))\nend\n`,
    mix: `request = function()\n  if math.random() < 0.9 then return wrk.format("GET", "/plants?limit=10") end\n  ${post}\nend\n`,
  }[kind];
  writeFileSync(file, head + body);
  return file;
}

const rows: string[] = [];
const notes: string[] = [];
const row = (engine: string, name: string, service: Result, bare?: Result): void => {
  const ratio = bare ? (service.rps / bare.rps).toFixed(2) : '—';
  const cells = [engine, name, int(service.rps), service.p50.toFixed(2), service.p99.toFixed(2)];
  const bareCells = bare ? [int(bare.rps), bare.p50.toFixed(2), bare.p99.toFixed(2)] : ['—', '—', '—'];
  rows.push(`| ${[...cells, ...bareCells, ratio].join(' | ')} |`);
  console.error(rows.at(-1));
};

function seedLines(owner: string, from: bigint, count: number, name: (i: number) => string): string {
  let out = '';
  for (let i = 0; i < count; i++) out += `{"id":${from + BigInt(i)},"owner":"${owner}","name":"${name(i)}"}\n`;
  return out;
}

function importLines(env: NodeJS.ProcessEnv, text: string): void {
  const file = join(dir, `seed-${Date.now()}.ndjson`);
  writeFileSync(file, text);
  cli(['import', file], env);
  rmSync(file);
}

/** Others' plants for the scale rows, from ids above everything the bench owner has. */
function seedOthers(env: NodeJS.ProcessEnv, from: number, to: number): void {
  for (let start = from; start < to; start += 200_000) {
    let text = '';
    for (let i = start; i < Math.min(to, start + 200_000); i++)
      text += `{"id":${4_000_000_000_000 + i},"owner":"other${i % 1000}","name":"plant ${i}"}\n`;
    importLines(env, text);
  }
}

/**
 * One GET over a fresh keep-alive connection, as wrk sends it: the answer's bytes on the wire (status
 * line, headers, body) and its body as sent (still compressed).
 */
async function onTheWire(
  url: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ total: number; body: Buffer }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  const lines = [
    `GET ${path} HTTP/1.1`,
    `Host: ${hostname}:${port}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let data = Buffer.alloc(0);
  try {
    for await (const chunk of socket) {
      data = Buffer.concat([data, chunk as Buffer]);
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) continue;
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(data.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (data.length >= end + 4 + length)
        return { total: end + 4 + length, body: data.subarray(end + 4, end + 4 + length) };
    }
  } finally {
    socket.destroy();
  }
  throw new Error(`${url}${path}: the connection closed before a whole answer`);
}

/**
 * Compression: the 100-plant page as it is and gzip-compressed, and a poll that If-None-Match answers
 * 304; the bare server answers the same bytes (the service's gzip bytes, a bare 304). Then the bytes
 * of one answer on the wire, brotli too.
 */
async function compressionScenarios(engine: string, service: Server, bare: Server, token: string): Promise<void> {
  const path = '/plants?limit=100';
  const auth = { Authorization: `Bearer ${token}` };
  const etag = (
    await fetch(`${service.url}${path}`, { headers: { ...auth, 'Accept-Encoding': 'identity' } })
  ).headers.get('etag');
  const variants: Array<[string, Record<string, string>]> = [
    [`GET ${path}, no Accept-Encoding`, {}],
    [`GET ${path}, Accept-Encoding: gzip`, { 'Accept-Encoding': 'gzip' }],
    [`GET ${path}, If-None-Match: its ETag (304)`, { 'If-None-Match': etag! }],
  ];
  for (const [name, headers] of variants) {
    const results: { service: Result[]; bare: Result[] } = { service: [], bare: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [which, server] of [
        ['bare', bare],
        ['service', service],
      ] as const)
        results[which].push(await wrk(`${server.url}${path}`, script('get', token, 0n, headers)));
    }
    row(engine, name, combine(results.service), combine(results.bare));
  }
  const sizes: string[] = [];
  for (const [name, headers] of [
    ...variants,
    [`GET ${path}, Accept-Encoding: br`, { 'Accept-Encoding': 'br' }],
  ] as const) {
    const served = await onTheWire(service.url, path, { ...auth, ...headers });
    const bared = name.endsWith('br') ? undefined : await onTheWire(bare.url, path, headers);
    sizes.push(`${name}: ${served.total} B (body ${served.body.length} B)${bared ? `, bare ${bared.total} B` : ''}`);
  }
  notes.push(`${engine}, bytes of one answer on the wire (status line, headers, body): ${sizes.join('; ')}`);
}

async function suite(engine: string, env: NodeJS.ProcessEnv): Promise<void> {
  cli(['migrate'], env);
  const token = mintToken(env, 'bench', 'plants:read,plants:write', { showStderr: true });
  // The bench owner's 200 plants (listed), 400,000 to delete, and 1,000 of others'.
  importLines(
    env,
    seedLines('bench', 1n, 200, (i) => `bench plant ${i}`),
  );
  importLines(
    env,
    // Enough for every DELETE run: 40,000 a second is above anything this service does.
    seedLines('bench', 1_000_000_000_000n, ROUNDS * DURATION * 40_000 + 10_000, () => 'to delete'),
  );
  seedOthers(env, 0, 1000);

  let service = await startService(env);
  const call = async (path: string, init: RequestInit = {}): Promise<string> =>
    (
      await fetch(`${service.url}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      })
    ).text();
  const bodies = {
    list10: await call('/plants?limit=10'),
    list100: await call('/plants?limit=100'),
    created: await call('/plants', { method: 'POST', body: '{"id":3000000000000000,"name":"bench plant"}' }),
    // The service's own gzip bytes of the 100-plant page, for the bare server's gzip answers.
    list100gzip: (
      await onTheWire(service.url, '/plants?limit=100', { Authorization: `Bearer ${token}`, 'Accept-Encoding': 'gzip' })
    ).body.toString('base64'),
  };
  const bare = await start(dir, [BARE], {
    env: { BARE_BODIES: JSON.stringify(bodies), PORT: '0' },
    cores: '0',
    ready: /listening (\d+)/,
  });
  // Steady state is what is measured: both servers first answer a few seconds of load unrecorded
  // (the JIT compiles the hot path; the first requests of a process pay for it).
  for (const server of [bare, service]) await wrk(`${server.url}/plants?limit=10`, script('get', token, 0n), WARM_UP);

  let run = 0n;
  const scenarios: Array<[string, (url: string) => string]> = [
    ['GET /plants?limit=10', (url) => `${url}/plants?limit=10`],
    ['GET /plants?limit=100', (url) => `${url}/plants?limit=100`],
    ['POST /plants (unique ids)', (url) => url],
    ['DELETE /plants/{id}', (url) => url],
    ['90/10 read/write mix', (url) => url],
  ];
  const kinds = ['get', 'get', 'post', 'delete', 'mix'] as const;
  let deleteBase = 1_000_000_000_000n;
  for (const [i, [name, target]] of SKIP.has('api') ? [] : scenarios.entries()) {
    const kind = kinds[i]!;
    const results: { service: Result[]; bare: Result[] } = { service: [], bare: [] };
    for (let round = 0; round < ROUNDS; round++) {
      for (const [which, server] of [
        ['bare', bare],
        ['service', service],
      ] as const) {
        run += 1n;
        const base = kind === 'delete' ? deleteBase : 2_000_000_000_000_000n + run * 1_000_000_000n;
        const result = await wrk(target(server.url), script(kind, token, base));
        if (kind === 'delete' && which === 'service') deleteBase += BigInt(result.requests) + 100n;
        results[which].push(result);
      }
    }
    row(engine, name, combine(results.service), combine(results.bare));
  }

  if (!SKIP.has('compression')) await compressionScenarios(engine, service, bare, token);

  if (!SKIP.has('scale')) {
    // Both scale rows are measured the same way: a fresh process, warmed up, then one run.
    await service.stop();
    service = await startService(env);
    await wrk(`${service.url}/plants?limit=10`, script('get', token, 0n), WARM_UP);
    const before = await wrk(`${service.url}/plants?limit=10`, script('get', token, 0n));
    row(engine, 'GET limit=10 with 1,000 plants of others', before);
    await service.stop();
    seedOthers(env, 1000, 1_000_000);
    service = await startService(env);
    await wrk(`${service.url}/plants?limit=10`, script('get', token, 0n), WARM_UP); // warm-up after the restart
    const after = await wrk(`${service.url}/plants?limit=10`, script('get', token, 0n));
    row(engine, 'GET limit=10 with 1,000,000 plants of others', after);
    rows.push(
      `| ${engine} | resident memory after the 1M run | ${rss(service.child.pid!).toFixed(0)} MB | | | | | | |`,
    );
    console.error(rows.at(-1));
  }
  await Promise.all([service.stop(), bare.stop()]);

  if (!SKIP.has('workers')) {
    const workers = await startService(env, '0,1', ['--workers', '2']);
    await sleep(1500); // both workers listening
    await wrk(`${workers.url}/plants?limit=10`, script('get', token, 0n), WARM_UP);
    const result = await wrk(`${workers.url}/plants?limit=10`, script('get', token, 0n));
    row(engine, 'GET limit=10, --workers 2 (unpinned; wrk shares the cores)', result);
    await workers.stop();
  }

  if (!SKIP.has('events')) {
    const events = await eventScenarios(engine, env);
    rows.push(...events.rows);
    notes.push(...events.notes);
  }

  if (!SKIP.has('cost'))
    costs.push(
      ...(await costRows(
        engine,
        env.DATABASE_URL?.startsWith('sqlite:') ? { DATABASE_URL: `sqlite:${join(dir, 'cost.db')}` } : env,
      )),
    );
}
const costs: CostRow[] = [];

if (process.argv.includes('--quick')) {
  await costOnly();
  process.exit(0);
}
if (process.argv.includes('--fairness')) {
  rmSync(dir, { recursive: true, force: true }); // bench/fairness.ts keeps its own
  await fairnessOnly(process.argv.slice(2));
  process.exit(0);
}
if (process.argv.includes('--fleet-writes')) {
  rmSync(dir, { recursive: true, force: true }); // bench/fleet-writes.ts keeps its own
  await fleetWritesOnly(process.argv.slice(2));
  process.exit(0);
}
if (process.argv.includes('--silent-primary')) {
  rmSync(dir, { recursive: true, force: true }); // bench/silent-primary.ts keeps its own
  await silentPrimaryOnly(process.argv.slice(2));
  process.exit(0);
}

try {
  ensureWrk();
  const started = new Date();
  if (!SKIP.has('sqlite')) await suite('SQLite', { DATABASE_URL: `sqlite:${join(dir, 'bench.db')}` });
  if (!SKIP.has('postgres')) {
    await onBenchPostgres((url) => suite('PostgreSQL', { DATABASE_URL: url }));
  }
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${started.toISOString()}`,
  );
  console.log(
    `wrk -t1 -c50 -d${DURATION}s pinned to core 1; servers pinned to core 0; ${ROUNDS} alternating rounds, medians\n`,
  );
  console.log(
    '| engine | scenario | service req/s | p50 ms | p99 ms | bare req/s | bare p50 | bare p99 | service/bare |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const line of rows) console.log(line);
  if (notes.length > 0) console.log(`\n${notes.map((line) => `- ${line}`).join('\n')}`);
  if (costs.length > 0) console.log(`\nServer CPU per request (bench/cost.ts):\n\n${costTable(costs)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
