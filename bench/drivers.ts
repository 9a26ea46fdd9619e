// node --import tsx bench/drivers.ts [--only connect|failover|cost] [--runs 3] [--n 20000]
//
// Issue 34, point 1: which driver the PostgreSQL engine should stand on, node-postgres with this
// service's host router (src/store/postgres/connection.ts's createPool, src/store/postgres/hosts.ts)
// or postgres.js (`postgres`, which reads multi-host URLs and target_session_attrs itself),
// measured on the same two PostgreSQL 15 servers, a primary and a streaming standby
// (test/failover/replica-pair.ts):
//
//   connect   URL `standby,primary` with target_session_attrs=read-write: a fresh pool's first
//             write, and how many of its first 20 fail (25006: it sits on the standby). URL
//             `dead,primary`, "dead" a TCP blackhole of this process (accepts, never answers),
//             connect_timeout=2: time to the first successful SELECT 1, then to 8 at once.
//   failover  a fresh pair per run; 4 writers in a loop (an INSERT each, 100 ms pause after an
//             error); the primary SIGKILLed, the standby promoted 1 s later: time from the
//             promote command to the first write sent after the kill and acknowledged, and the
//             writes that failed.
//   cost      SELECT 1 and a prepared INSERT, N sequential and N with 8 in flight, single-host
//             and multi-host URL: p50/p99, requests/s, and this process's CPU per request. The
//             database has synchronous_commit off so that the commit's fsync does not hide the
//             drivers' own cost. A single-host URL takes no router: createPool gives node-postgres
//             its plain pool then.
//
// Each driver is used as documented: node-postgres through the service's own createPool (its
// failover wait the service's default, 10 s); postgres.js with its defaults, the same URL, and no
// failover of our own. Drivers alternate within each round; tables give medians of the rounds.
// Every server this process starts is stopped by pid however it ends.
import { type Server as NetServer, type Socket, createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import postgres from 'postgres';
import { FAILOVER_WAIT_MS, createPool } from '../src/store/postgres/connection.js';
import { type ReplicaPair, type Server, startReplicaPair } from '../test/failover/replica-pair.js';

const { values: args } = parseArgs({
  options: {
    only: { type: 'string' },
    runs: { type: 'string', default: '3' },
    n: { type: 'string', default: '20000' },
  },
});
const RUNS = Number(args.runs);
const N = Number(args.n);
const DEADLINE_MS = 45 * 60_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const log = (line: string) => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const out = (line = '') => console.log(line);
const load = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

// The pairs alive now: closed in order on the way out; SIGQUIT (immediate shutdown) to their
// postmasters if the process exits before that could run.
const pairs = new Set<ReplicaPair>();
function postmasterPid(server: Server): number | undefined {
  try {
    return Number(readFileSync(join(server.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return undefined;
  }
}
process.once('exit', () => {
  for (const pair of pairs)
    for (const server of [pair.primary, pair.standby]) {
      const pid = server.child === undefined ? undefined : postmasterPid(server);
      if (pid !== undefined) {
        try {
          process.kill(pid, 'SIGQUIT');
        } catch {
          // gone already
        }
      }
    }
});
async function closeAll(): Promise<void> {
  for (const pair of pairs) {
    pairs.delete(pair);
    await pair.close().catch((error: unknown) => log(`closing a pair: ${String(error)}`));
  }
}
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    log(`${signal}: stopping every server`);
    void closeAll().finally(() => process.exit(130));
  });
setTimeout(() => {
  log(`past ${DEADLINE_MS / 60_000} min: stopping every server`);
  void closeAll().finally(() => process.exit(2));
}, DEADLINE_MS).unref();

async function newPair(): Promise<ReplicaPair> {
  const started = Date.now();
  const pair = await startReplicaPair();
  pairs.add(pair);
  await pair.sql(
    pair.primary,
    'CREATE TABLE bench_rows (id bigserial PRIMARY KEY, writer int NOT NULL, n int NOT NULL)',
  );
  log(`replica pair ${pair.primary.port} → ${pair.standby.port} ready in ${Date.now() - started} ms`);
  return pair;
}
async function closePair(pair: ReplicaPair): Promise<void> {
  pairs.delete(pair);
  await pair.close();
}

// ---------------------------------------------------------------------------------------------
// The two drivers, behind the three calls the benchmark makes.

type DriverName = 'node-postgres + router' | 'postgres.js';
const DRIVERS: readonly DriverName[] = ['node-postgres + router', 'postgres.js'];

interface Driver {
  select(): Promise<void>;
  insert(writer: number, n: number): Promise<void>;
  end(): Promise<void>;
}

const INSERT = 'INSERT INTO bench_rows (writer, n) VALUES ($1, $2)';

function open(name: DriverName, url: string): Driver {
  if (name === 'postgres.js') {
    const sql = postgres(url, { max: 10, onnotice: () => {} });
    return {
      select: async () => void (await sql`SELECT 1`),
      insert: async (writer, n) => void (await sql`INSERT INTO bench_rows (writer, n) VALUES (${writer}, ${n})`),
      end: () => sql.end({ timeout: 1 }),
    };
  }
  const pool = createPool(url, { poolSize: 10, failoverWaitMs: FAILOVER_WAIT_MS });
  return {
    select: async () => void (await pool.query('SELECT 1')),
    insert: async (writer, n) => void (await pool.query({ name: 'bench_insert', text: INSERT, values: [writer, n] })),
    end: () => pool.end(),
  };
}

/** An error in a few words: its SQLSTATE or driver code, else the start of its message. */
function codeOf(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  return error instanceof Error ? error.message.slice(0, 40) : String(error);
}
const tally = (counts: Map<string, number>) => [...counts].map(([code, n]) => `${n}× ${code}`).join(', ') || 'none';
const count = (counts: Map<string, number>, error: unknown) =>
  counts.set(codeOf(error), (counts.get(codeOf(error)) ?? 0) + 1);

const median = (values: number[]) => {
  const s = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length === 0 ? NaN : s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : '—';
const each = (values: number[], digits = 0) => values.map((v) => fmt(v, digits)).join(' / ');

/** A TCP server on 127.0.0.1 that accepts and never answers: a host that is up but dead. */
async function blackhole(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: NetServer = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

// ---------------------------------------------------------------------------------------------
// 1. Correctness at connect.

async function connectScenario(pair: ReplicaPair): Promise<void> {
  const query = 'target_session_attrs=read-write&connect_timeout=2';
  out(`### Connect (load average ${load()})`);
  out();
  out('URL `standby,primary`, `target_session_attrs=read-write`: a fresh pool, its first write, then 19 more.');
  out();
  out('| driver | first write | writes failed of 20 | ms to the first write |');
  out('| --- | --- | --- | --- |');
  for (const name of DRIVERS) {
    const firsts: string[] = [];
    const failed: number[] = [];
    const times: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const driver = open(name, pair.url([pair.standby, pair.primary], query));
      const started = performance.now();
      let bad = 0;
      for (let i = 0; i < 20; i++) {
        try {
          await driver.insert(0, i);
          if (i === 0) firsts.push('ok');
        } catch (error) {
          bad++;
          if (i === 0) firsts.push(`failed, ${codeOf(error)}`);
        }
        if (i === 0) times.push(performance.now() - started);
      }
      failed.push(bad);
      await driver.end();
    }
    out(`| ${name} | ${[...new Set(firsts)].join(', ')} | ${each(failed)} | ${fmt(median(times))} |`);
  }
  out();

  const dead = await blackhole();
  try {
    const fake: Server = { port: dead.port, dir: '', child: undefined };
    out('URL `dead,primary` (dead: a blackhole), `connect_timeout=2`: a fresh pool, SELECT 1 until one succeeds');
    out('(100 ms after each error), then 8 at once until all 8 succeed; the runs one by one.');
    out();
    out('| driver | ms to the first success | errors before it | ms until 8 at once succeed | their errors |');
    out('| --- | --- | --- | --- | --- |');
    for (const name of DRIVERS) {
      const firstMs: number[] = [];
      const firstErrors: number[] = [];
      const eightMs: number[] = [];
      const eightErrors: number[] = [];
      const codes = new Map<string, number>();
      for (let run = 0; run < RUNS; run++) {
        const driver = open(name, pair.url([fake, pair.primary], query));
        const untilOk = async (): Promise<number> => {
          let errors = 0;
          const give = performance.now() + 60_000;
          for (;;) {
            try {
              await driver.select();
              return errors;
            } catch (error) {
              errors++;
              count(codes, error);
              if (performance.now() > give) throw new Error(`no success in 60 s: ${tally(codes)}`);
              await sleep(100);
            }
          }
        };
        let started = performance.now();
        firstErrors.push(await untilOk());
        firstMs.push(performance.now() - started);
        started = performance.now();
        const errors = await Promise.all(Array.from({ length: 8 }, untilOk));
        eightMs.push(performance.now() - started);
        eightErrors.push(errors.reduce((a, b) => a + b, 0));
        await driver.end();
      }
      out(
        `| ${name} | ${each(firstMs)} | ${each(firstErrors)} | ${each(eightMs)} | ${each(eightErrors)} (${tally(codes)}) |`,
      );
    }
    out();
  } finally {
    await dead.close();
  }
}

// ---------------------------------------------------------------------------------------------
// 2. Failover: 4 writers, the primary killed, the standby promoted.

interface FailoverRun {
  /** From the start of `pg_ctl promote -w` (which returns once the standby is promoted). */
  promotedToFirstMs: number;
  killToFirstMs: number;
  promoteMs: number;
  errors: number;
  codes: Map<string, number>;
  before: number;
}

async function failoverRun(name: DriverName): Promise<FailoverRun> {
  const pair = await newPair();
  const driver = open(
    name,
    pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write&connect_timeout=2'),
  );
  const codes = new Map<string, number>();
  let stop = false;
  let killStarted = Infinity;
  let killedAt = Infinity;
  let firstAfter = Infinity;
  let errors = 0;
  let before = 0;
  // A write sent once the old primary's processes are gone can only be acknowledged by the new one;
  // a failure counts from the moment the kill began (what was in flight then fails too).
  const writer = async (id: number) => {
    for (let n = 0; !stop; n++) {
      const sent = performance.now();
      try {
        await driver.insert(id, n);
        if (sent > killedAt) firstAfter = Math.min(firstAfter, performance.now());
        else if (killStarted === Infinity) before++;
      } catch (error) {
        if (performance.now() > killStarted) {
          errors++;
          count(codes, error);
        }
        await sleep(100);
      }
    }
  };
  const writers = Array.from({ length: 4 }, (_, id) => writer(id));
  try {
    await sleep(2000);
    killStarted = performance.now();
    await pair.stop(pair.primary, 'kill');
    killedAt = performance.now();
    await sleep(1000);
    const promoteStarted = performance.now();
    await pair.promote(pair.standby);
    const promotedAt = performance.now();
    const give = promotedAt + 30_000;
    while (firstAfter === Infinity && performance.now() < give) await sleep(20);
    await sleep(2000); // errors that come after the first success count too
    return {
      promotedToFirstMs: firstAfter - promoteStarted,
      killToFirstMs: firstAfter - killedAt,
      promoteMs: promotedAt - promoteStarted,
      errors,
      codes,
      before,
    };
  } finally {
    stop = true;
    await Promise.all(writers);
    await driver.end().catch(() => {});
    await closePair(pair);
  }
}

async function failoverScenario(): Promise<void> {
  const runs = new Map<DriverName, FailoverRun[]>(DRIVERS.map((name) => [name, []]));
  for (let run = 0; run < RUNS; run++)
    for (const name of DRIVERS) {
      const result = await failoverRun(name);
      runs.get(name)!.push(result);
      log(
        `failover ${run + 1} ${name}: promote → first write ${fmt(result.promotedToFirstMs)} ms, ${result.errors} errors (${tally(result.codes)}), load ${load()}`,
      );
    }
  out(`### Failover (load average ${load()})`);
  out();
  out('URL `primary,standby`, `target_session_attrs=read-write&connect_timeout=2`; 4 writers; SIGKILL of the');
  out('primary, `pg_ctl promote -w` of the standby 1 s later. Median, then the runs one by one.');
  out();
  out(
    '| driver | promote → first write, ms | kill → first write, ms | promote took, ms | writes failed after the kill | their errors | writes before the kill (2 s) |',
  );
  out('| --- | --- | --- | --- | --- | --- | --- |');
  for (const [name, list] of runs) {
    const codes = new Map<string, number>();
    for (const r of list) for (const [c, n] of r.codes) codes.set(c, (codes.get(c) ?? 0) + n);
    const col = (f: (r: FailoverRun) => number) => `${fmt(median(list.map(f)))} (${each(list.map(f))})`;
    out(
      `| ${name} | ${col((r) => r.promotedToFirstMs)} | ${col((r) => r.killToFirstMs)} | ${col((r) => r.promoteMs)} | ${col((r) => r.errors)} | ${tally(codes)} | ${col((r) => r.before)} |`,
    );
  }
  out();
}

// ---------------------------------------------------------------------------------------------
// 3. Per-request cost.

interface CostRun {
  rps: number;
  p50: number;
  p99: number;
  cpuUs: number;
}

async function costRun(driver: Driver, call: (i: number) => Promise<void>, inFlight: number): Promise<CostRun> {
  // Warm-up: every connection of the run opened, statements prepared.
  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      for (let i = 0; i < 100; i++) await call(w * 100 + i);
    }),
  );
  const latencies = new Float64Array(N);
  let next = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let i = next++; i < N; i = next++) {
        const sent = performance.now();
        await call(i);
        latencies[i] = performance.now() - sent;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  latencies.sort();
  return {
    rps: N / seconds,
    p50: latencies[Math.ceil(0.5 * N) - 1]!,
    p99: latencies[Math.ceil(0.99 * N) - 1]!,
    cpuUs: (used.user + used.system) / N,
  };
}

async function costScenario(pair: ReplicaPair): Promise<void> {
  await pair.sql(pair.primary, 'ALTER DATABASE postgres SET synchronous_commit = off');
  const urls = {
    single: pair.url([pair.primary]),
    'multi-host': pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write&connect_timeout=2'),
  } as const;
  const shapes = ['SELECT 1', 'INSERT'] as const;
  const modes = [1, 8] as const;
  const key = (...parts: Array<string | number>) => parts.join('|');
  const results = new Map<string, CostRun[]>();
  for (let round = 0; round < RUNS; round++) {
    for (const shape of shapes)
      for (const inFlight of modes)
        for (const [urlName, url] of Object.entries(urls))
          for (const name of round % 2 === 0 ? DRIVERS : [...DRIVERS].reverse()) {
            const driver = open(name, url);
            try {
              const call = shape === 'SELECT 1' ? () => driver.select() : (i: number) => driver.insert(inFlight, i);
              const r = await costRun(driver, call, inFlight);
              const k = key(shape, inFlight, urlName, name);
              results.set(k, [...(results.get(k) ?? []), r]);
              log(
                `cost ${round + 1} ${shape} ×${inFlight} ${urlName} ${name}: ${fmt(r.rps)}/s p50 ${r.p50.toFixed(3)} p99 ${r.p99.toFixed(3)} ms, ${r.cpuUs.toFixed(1)} µs CPU, load ${load()}`,
              );
            } finally {
              await driver.end();
            }
          }
    await pair.sql(pair.primary, 'TRUNCATE bench_rows');
  }
  out(`### Per-request cost (load average ${load()})`);
  out();
  out(`N = ${fmt(N)} per run, medians of ${RUNS} rounds; CPU: this process's user + system time per request.`);
  out();
  out('| query | in flight | URL | driver | requests/s | p50 ms | p99 ms | CPU µs/request |');
  out('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const shape of shapes)
    for (const inFlight of modes)
      for (const urlName of Object.keys(urls))
        for (const name of DRIVERS) {
          const list = results.get(key(shape, inFlight, urlName, name)) ?? [];
          const m = (f: (r: CostRun) => number) => median(list.map(f));
          out(
            `| ${shape} | ${inFlight} | ${urlName} | ${name} | ${fmt(m((r) => r.rps))} | ${fmt(
              m((r) => r.p50),
              3,
            )} | ${fmt(
              m((r) => r.p99),
              3,
            )} | ${fmt(
              m((r) => r.cpuUs),
              1,
            )} |`,
          );
        }
  out();
}

// ---------------------------------------------------------------------------------------------

const only = args.only;
out(
  `Driver benchmark, ${new Date().toISOString()}, ${cpus().length} × ${cpus()[0]?.model ?? '?'}, Node ${process.version}`,
);
out(`runs ${RUNS}, N ${N}, load average at the start ${load()}`);
out();
try {
  if (only === undefined || only === 'connect' || only === 'cost') {
    const pair = await newPair();
    try {
      if (only === undefined || only === 'connect') await connectScenario(pair);
      if (only === undefined || only === 'cost') await costScenario(pair);
    } finally {
      await closePair(pair);
    }
  }
  if (only === undefined || only === 'failover') await failoverScenario();
} finally {
  await closeAll();
}
out(`load average at the end ${load()}`);
