// Writes of a fleet under a synchronous standby: the same writers on one instance and
// on two, against one PostgreSQL primary whose every commit waits about 3 ms for its standby.
//
//   npm run build                       (the service runs from dist/; once, after a change to src/)
//   node --import tsx bench/fleet-writes.ts [--seconds 20] [--rounds 2] [--writers 32] [--delay-ms 3]
//                                           [--streams 0] [--webhook] [--pgbench] [--pgbench-seconds 10]
//   BENCH_FLEET_CHECKOUT=<dir> node --import tsx bench/fleet-writes.ts        (an A/B: another built
//                                       checkout's service, migrations and CLI; this harness stays)
//
// It starts a primary and a streaming standby of this machine's PostgreSQL 15
// (test/failover/replica-pair.ts, run as the `postgres` user on ports of their own), then makes the
// standby synchronous and slow, as a standby in another availability zone is:
//
//   primary   synchronous_standby_names = 'fleet_standby' (the standby's cluster_name),
//             synchronous_commit = remote_apply, shared_preload_libraries = pg_stat_statements
//   standby   cluster_name = 'fleet_standby', recovery_min_apply_delay = 3ms (--delay-ms)
//
// and restarts both so that every setting holds. First the single-commit latency: a loop of
// one-row INSERTs on one connection, with synchronous_commit remote_apply (what the service's
// writes get) and local (without the standby): the difference is the standby's wait. Then the
// runs, each on a database of its own (created, migrated with the checkout's `plant-store migrate`,
// a token minted with its `token create`, dropped after): the service (`plant-store serve`,
// DATABASE_URL on the primary, PORT=0, RATE_LIMIT=off, MAX_EVENT_LOOP_DELAY=off) as one instance
// with all the writers, and as two instances with half each, alternated (one, two, one, two with
// --rounds 2). Each writer POSTs /plants in a loop, one request in flight, distinct ids, on its own
// keep-alive connection to 127.0.0.1. After a 3 s warm-up, --seconds are measured:
//
//  - creates/s: the 200s answered in the window; p50 / p99 of those creates, sent to answered;
//  - batches/s and rows per batch: the events whose created_at (the database's clock at the
//    statement) falls in the window, and the distinct transactions (xmin) that wrote them;
//  - the create statements (pg_stat_statements calls of the INSERT into plants), per second;
//  - commits/s of the run's database (pg_stat_database xact_commit; its counters reach the view
//    within a second, so the window's edges are that fuzzy);
//  - wakes: the NOTIFYs on the service's channel that one LISTEN connection heard in the window,
//    per second and per batch (each one wakes every instance's change feed and dispatcher);
//  - the dispatchers' statements (their fan-out, claim and next-due reads, run when a wake may
//    have work for them) and every other statement run at least once a second, with calls.
//
// --streams N opens N change-feed readers (GET /events) per instance, so that their reads count too.
// --webhook makes one active webhook of every plant's plant.created (WEBHOOK_ALLOW_PRIVATE=1), its
// receiver in this process on 127.0.0.1 answering 204: the dispatchers then have work on each wake,
// and the deliveries received per second are a column of their own.
// --pgbench then measures the database alone with pgbench on the same pair: a statement shaped as
// the service's create batch (5 plants and their 5 events in one statement), with the event-order
// advisory lock and the NOTIFY, each alone, neither, neither with the NOTIFY sent after the commit
// by a statement of its own that does not wait for the standby, and the lock taken SHARED (writers
// do not wait for each other); 8 and 32 clients. With the defaults a run takes about 2 minutes
// (4 more with --pgbench). main(argv) is exported, for bench/bench.ts to dispatch a switch to it.
//
// Nothing is pinned: the machine's cores are shared by the service, PostgreSQL and the writers
// (this process), as the load average beside each run shows. Every step is bounded in time, the
// whole harness too, and whatever it started (the service, the PostgreSQL servers, pgbench) is
// stopped by its pid on the way out, also on an error or a signal. Any answer other than 200 fails
// the run: a broken service prints no numbers.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type ClientRequest, type IncomingMessage, createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { once } from 'node:events';
import pg from 'pg';
import { Pool, request } from 'undici';
import { type ReplicaPair, type Server as PgServer, startReplicaPair } from '../test/failover/replica-pair.js';
import {
  children,
  exitAfter,
  exitOnSignal,
  liveDirs,
  livePairs,
  loadAverage,
  log,
  now,
  sleep,
  until,
} from './kit/process.js';
import { type Server, cliAsync, mintTokenAsync, startService } from './kit/server.js';
import { fmt, int, mean, percentile } from './kit/stats.js';

const THIS = fileURLToPath(import.meta.url);
const CHECKOUT = process.env.BENCH_FLEET_CHECKOUT
  ? resolve(process.env.BENCH_FLEET_CHECKOUT)
  : fileURLToPath(new URL('..', import.meta.url));
const BIN = join(CHECKOUT, 'bin/plant-store.js');
const PG_BIN = '/usr/lib/postgresql/15/bin';
const STANDBY_NAME = 'fleet_standby';
const WARM_UP_MS = 3000;
/** A create not answered by then is a failure (status 0). */
const REQUEST_TIMEOUT_MS = 30_000;
/** Creates in one pgbench transaction: about what a batch of the service carries at one instance. */
const PGBENCH_ROWS = 5;
const EVENT_ORDER_LOCK = 7_316_002;
/** The service's LISTEN/NOTIFY channel (src/store/postgres/statements.ts). */
const EVENT_CHANNEL = 'plant_store_events';

/** The checkout's CLI, bounded in time. */
const CLI = { bin: BIN, timeoutMs: 120_000 };

// ---------------------------------------------------------------------------------------------
// The pair: synchronous, its standby applying each commit `delayMs` late.

export async function startPair(delayMs: number): Promise<ReplicaPair> {
  const pair = await startReplicaPair({ synchronous: true });
  livePairs.add(pair);
  const { primary, standby } = pair;
  // ALTER SYSTEM takes no transaction id: nothing here waits for the standby.
  await pair.sql(standby, `ALTER SYSTEM SET cluster_name = '${STANDBY_NAME}'`);
  await pair.sql(standby, `ALTER SYSTEM SET recovery_min_apply_delay = '${delayMs}ms'`);
  for (const [name, value] of [
    ['synchronous_standby_names', STANDBY_NAME],
    ['synchronous_commit', 'remote_apply'],
    ['shared_preload_libraries', 'pg_stat_statements'],
    ['shared_buffers', '128MB'],
  ])
    await pair.sql(primary, `ALTER SYSTEM SET ${name} = '${value}'`);
  await pair.stop(standby, 'fast');
  await pair.stop(primary, 'fast');
  await pair.restart(primary);
  await pair.restart(standby);
  await until(
    async () => {
      const { rows } = await pair.sql(
        primary,
        `SELECT count(*)::int AS n FROM pg_stat_replication WHERE application_name = '${STANDBY_NAME}' AND sync_state = 'sync'`,
      );
      return (rows[0] as { n: number }).n === 1;
    },
    60_000,
    'the standby to be synchronous',
    100,
  );
  await pair.sql(primary, 'CREATE EXTENSION pg_stat_statements');
  return pair;
}

const connect = async (server: PgServer, database = 'postgres'): Promise<pg.Client> => {
  const client = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database });
  await client.connect();
  return client;
};

interface Latency {
  readonly mode: string;
  readonly p50: number;
  readonly p99: number;
}

/** One-row INSERTs in a loop on one connection, each its own commit: remote_apply (the standby's wait) and local. */
async function commitLatency(server: PgServer, n = 400): Promise<Latency[]> {
  const client = await connect(server);
  try {
    await client.query('CREATE TABLE IF NOT EXISTS fleet_commit_probe (id bigserial PRIMARY KEY, at bigint)');
    const out: Latency[] = [];
    for (const mode of ['remote_apply', 'local']) {
      await client.query(`SET synchronous_commit = ${mode}`);
      const times: number[] = [];
      for (let i = 0; i < n + 20; i++) {
        const started = now();
        await client.query('INSERT INTO fleet_commit_probe (at) VALUES ($1)', [i]);
        if (i >= 20) times.push(now() - started);
      }
      out.push({ mode, p50: percentile(times, 50), p99: percentile(times, 99) });
    }
    await client.query('RESET synchronous_commit');
    await client.query('DROP TABLE fleet_commit_probe');
    return out;
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------
// One run: a fresh database, the service as `instances` instances, the writers split over them.

interface Statement {
  readonly label: string;
  readonly calls: number;
  readonly rows: number;
  readonly meanMs: number;
}

interface RunResult {
  readonly index: number;
  readonly instances: number;
  readonly writers: number;
  readonly load: string;
  readonly seconds: number;
  readonly creates: number;
  readonly p50: number;
  readonly p99: number;
  readonly events: number;
  readonly batches: number;
  readonly commits: number;
  /** The NOTIFYs one instance heard in the window: each wakes its change feed and dispatcher. */
  readonly wakes: number;
  /** Deliveries the --webhook receiver got in the window. */
  readonly delivered: number;
  readonly statements: Statement[];
}

/** A short name for a statement of pg_stat_statements: the service's known ones by name, others by their start. */
function label(query: string): string {
  const q = query.replace(/\s+/g, ' ').trim();
  if (/INSERT INTO plants/.test(q) && /INSERT INTO events/.test(q)) return 'create batch (insertBatch)';
  if (/DELETE FROM plants/.test(q) && /INSERT INTO events/.test(q)) return 'delete batch (deleteBatch)';
  if (/fanned_through/.test(q) && /SKIP LOCKED/.test(q)) return 'dispatcher: fan-out';
  if (/turns AS MATERIALIZED/.test(q)) return 'dispatcher: claim';
  if (/ AS wait$/.test(q)) return 'dispatcher: next due';
  if (/^SELECT .* FROM events WHERE id > \$1/.test(q)) return 'event log read (change feed)';
  return q.length > 70 ? `${q.slice(0, 67)}…` : q;
}

const DISPATCHER = /^dispatcher: /;
const CREATE_BATCH = 'create batch (insertBatch)';

/** One writer per connection, one request in flight each, ids from the shared counter, until stop(). */
function writers(url: string, token: string, n: number, ids: { next: number }) {
  const pool = new Pool(url, { connections: n, pipelining: 1, keepAliveTimeout: 60_000 });
  const answers: Array<{ status: number; sentAt: number; answeredAt: number; body: string }> = [];
  let stopping = false;
  let closed: Promise<void> | undefined;
  const loops = Array.from({ length: n }, async () => {
    while (!stopping) {
      const id = ids.next++;
      const sentAt = now();
      let status = 0;
      let body = '';
      try {
        const answer = await pool.request({
          path: '/plants',
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: `{"id":${id},"name":"plant ${id}"}`,
          headersTimeout: REQUEST_TIMEOUT_MS,
          bodyTimeout: REQUEST_TIMEOUT_MS,
        });
        body = await answer.body.text();
        status = answer.statusCode;
      } catch (error) {
        body = String(error);
      }
      answers.push({ status, sentAt, answeredAt: now(), body });
    }
  });
  return {
    answers,
    stop(): Promise<void> {
      stopping = true;
      closed ??= Promise.all(loops).then(() => pool.close());
      return closed;
    },
  };
}

/** GET /events held open, its bytes read and dropped: a change-feed reader. */
function stream(port: number, token: string): ClientRequest {
  const request = get({
    host: '127.0.0.1',
    port,
    path: '/events',
    agent: false,
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  request.on('error', () => {});
  request.on('response', (response: IncomingMessage) => response.resume());
  return request;
}

async function oneRun(
  pair: ReplicaPair,
  stats: pg.Client,
  dir: string,
  index: number,
  instances: number,
  totalWriters: number,
  seconds: number,
  ids: { next: number },
  { streamsEach, webhook }: { readonly streamsEach: number; readonly webhook: boolean },
): Promise<RunResult> {
  const database = `fleet_run_${index}`;
  const databaseUrl = `postgres://postgres@127.0.0.1:${pair.primary.port}/${database}`;
  await stats.query(`DROP DATABASE IF EXISTS ${database}`);
  await stats.query(`CREATE DATABASE ${database}`);
  const services: Server[] = [];
  const feeds: ClientRequest[] = [];
  let writerSets: Array<ReturnType<typeof writers>> = [];
  // With --webhook: one active webhook of every plant, its receiver here, answering 204 at once.
  let received = 0;
  const receiver = webhook
    ? createServer((request, response) => {
        request.resume();
        request.on('end', () => {
          received += 1;
          response.writeHead(204).end();
        });
      })
    : undefined;
  if (receiver !== undefined) await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  // The NOTIFYs that wake every instance's change feed and dispatcher, counted as one instance hears them.
  const listener = await connect(pair.primary, database);
  let wakes = 0;
  listener.on('notification', () => (wakes += 1));
  await listener.query(`LISTEN ${EVENT_CHANNEL}`);
  try {
    await cliAsync(['migrate'], { DATABASE_URL: databaseUrl }, CLI);
    const token = await mintTokenAsync(
      { DATABASE_URL: databaseUrl },
      'bench',
      webhook ? 'plants:read,plants:write,plants:admin,webhooks:write' : 'plants:read,plants:write',
      CLI,
    );
    for (let i = 0; i < instances; i++)
      services.push(
        await startService(
          dir,
          {
            DATABASE_URL: databaseUrl,
            HOST: '127.0.0.1',
            RATE_LIMIT: 'off',
            MAX_EVENT_LOOP_DELAY: 'off',
            ...(webhook ? { WEBHOOK_ALLOW_PRIVATE: '1' } : {}),
          },
          { bin: BIN, cores: `0-${cpus().length - 1}`, timeoutMs: 120_000 },
        ),
      );
    for (const service of services) for (let i = 0; i < streamsEach; i++) feeds.push(stream(service.port, token));
    if (receiver !== undefined) {
      const answer = await request(`${services[0]!.url}/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`,
          events: ['plant.created'],
        }),
      });
      const body = await answer.body.text();
      if (answer.statusCode !== 201) throw new Error(`POST /webhooks answered ${answer.statusCode}: ${body}`);
    }
    const each = totalWriters / instances;
    writerSets = services.map((service) => writers(service.url, token, each, ids));
    await sleep(WARM_UP_MS);

    // The window: pg_stat_statements from zero, the database's commits and clock at its edges.
    const edge = async () =>
      (
        await stats.query<{ commits: string; at: string }>(
          `SELECT xact_commit::text AS commits, (extract(epoch FROM clock_timestamp()) * 1000)::bigint::text AS at
           FROM pg_stat_database WHERE datname = $1`,
          [database],
        )
      ).rows[0]!;
    await stats.query('SELECT pg_stat_statements_reset()');
    const before = await edge();
    const loadAtStart = loadAverage();
    const [wakesBefore, receivedBefore] = [wakes, received];
    const t0 = now();
    await sleep(seconds * 1000);
    const t1 = now();
    const [wakesInWindow, receivedInWindow] = [wakes - wakesBefore, received - receivedBefore];
    const after = await edge();
    const statementRows = (
      await stats.query<{ query: string; calls: string; rows: string; total: number }>(
        `SELECT s.query, s.calls::text AS calls, s.rows::text AS rows, s.total_exec_time AS total
         FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.calls DESC`,
        [database],
      )
    ).rows;
    await Promise.all(writerSets.map((w) => w.stop()));
    const window = (t1 - t0) / 1000;

    const answers = writerSets.flatMap((w) => w.answers);
    const failed = answers.filter((a) => a.status !== 200);
    if (failed.length > 0)
      throw new Error(
        `${failed.length} of ${answers.length} creates were not answered 200; the first: ${failed[0]!.status} ${failed[0]!.body.slice(0, 300)}`,
      );
    const inWindow = answers.filter((a) => a.answeredAt >= t0 && a.answeredAt < t1).map((a) => a.answeredAt - a.sentAt);

    const client = await connect(pair.primary, database);
    let events: number;
    let batches: number;
    try {
      const { rows } = await client.query<{ events: string; batches: string }>(
        `SELECT count(*)::text AS events, count(DISTINCT xmin::text)::text AS batches
         FROM events WHERE created_at >= $1 AND created_at < $2`,
        [before.at, after.at],
      );
      events = Number(rows[0]!.events);
      batches = Number(rows[0]!.batches);
    } finally {
      await client.end();
    }
    const statements = new Map<string, Statement>();
    for (const r of statementRows) {
      const name = label(r.query);
      const seen = statements.get(name);
      const calls = Number(r.calls) + (seen?.calls ?? 0);
      const total = r.total + (seen ? seen.meanMs * seen.calls : 0);
      statements.set(name, { label: name, calls, rows: Number(r.rows) + (seen?.rows ?? 0), meanMs: total / calls });
    }
    return {
      index,
      instances,
      writers: totalWriters,
      load: loadAtStart,
      seconds: window,
      creates: inWindow.length,
      p50: percentile(inWindow, 50),
      p99: percentile(inWindow, 99),
      events,
      batches,
      commits: Number(after.commits) - Number(before.commits),
      wakes: wakesInWindow,
      delivered: receivedInWindow,
      statements: [...statements.values()].sort((a, b) => b.calls - a.calls),
    };
  } finally {
    await Promise.all(writerSets.map((w) => w.stop().catch(() => {})));
    for (const feed of feeds) feed.destroy();
    for (const service of services) await service.stop();
    await listener.end().catch(() => {});
    receiver?.close();
    await stats.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
}

// ---------------------------------------------------------------------------------------------
// pgbench: the database alone, the create statement's shape with and without each gate.

const GATES: ReadonlyArray<readonly [string, string, string]> = [
  ['as it is: advisory lock + NOTIFY', `pg_advisory_xact_lock(${EVENT_ORDER_LOCK}), pg_notify('fleet_bench', '')`, ''],
  ['advisory lock alone', `pg_advisory_xact_lock(${EVENT_ORDER_LOCK})`, ''],
  ['NOTIFY alone', `pg_notify('fleet_bench', '')`, ''],
  ['neither', '1', ''],
  [
    'neither; NOTIFY after, not waiting for the standby',
    '1',
    "SELECT set_config('synchronous_commit', 'off', true), pg_notify('fleet_bench', '');",
  ],
  [
    'shared advisory lock (writers do not wait for each other)',
    `pg_advisory_xact_lock_shared(${EVENT_ORDER_LOCK})`,
    '',
  ],
];

interface PgbenchResult {
  readonly gate: string;
  readonly clients: number;
  readonly tps: number;
  readonly latencyMs: number;
}

async function pgbenchCeiling(pair: ReplicaPair, stats: pg.Client, dir: string, seconds: number) {
  const database = 'fleet_pgbench';
  await stats.query(`DROP DATABASE IF EXISTS ${database}`);
  await stats.query(`CREATE DATABASE ${database}`);
  const client = await connect(pair.primary, database);
  const results: PgbenchResult[] = [];
  try {
    await client.query(`
      CREATE SEQUENCE plant_ids;
      CREATE TABLE plants (id bigint PRIMARY KEY, owner text NOT NULL, name text NOT NULL);
      CREATE TABLE events (id bigserial PRIMARY KEY, type text NOT NULL, owner text NOT NULL,
        plant_id bigint NOT NULL, payload text NOT NULL, created_at bigint NOT NULL);
      CREATE INDEX events_owner_id ON events (owner, id);
      CREATE INDEX events_created_at ON events (created_at);`);
    for (const [gate, select, after] of GATES) {
      const script = join(dir, 'pgbench.sql');
      // One line: pgbench sends each line as a statement of its own (here, a transaction of its own).
      writeFileSync(
        script,
        `WITH changed AS (INSERT INTO plants (id, owner, name) SELECT nextval('plant_ids'), 'bench', 'plant' FROM generate_series(1, ${PGBENCH_ROWS}) RETURNING id, owner), ` +
          `gated AS (SELECT ${select} FROM (SELECT count(*) AS n FROM changed) c WHERE c.n > 0), ` +
          `event AS (INSERT INTO events (type, owner, plant_id, payload, created_at) SELECT 'plant.created', changed.owner, changed.id, '{}', (extract(epoch FROM now()) * 1000)::bigint FROM gated, changed ORDER BY changed.id RETURNING id) ` +
          `SELECT count(*) FROM changed;\n${after}\n`,
      );
      for (const clients of [8, 32]) {
        const child = spawn(
          join(PG_BIN, 'pgbench'),
          [
            ...['-h', '127.0.0.1', '-p', String(pair.primary.port), '-U', 'postgres', '-n', '-M', 'prepared'],
            ...['-c', String(clients), '-j', '2', '-T', String(seconds), '-f', script, database],
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        );
        children.add(child);
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => void (out += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => void (out += chunk.toString()));
        const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 60) * 1000);
        const [code] = (await once(child, 'exit')) as [number | null];
        clearTimeout(timer);
        children.delete(child);
        const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1];
        const latency = /latency average = ([\d.]+) ms/.exec(out)?.[1];
        if (code !== 0 || tps === undefined || latency === undefined)
          throw new Error(`pgbench (${gate}, ${clients} clients) failed: ${out.slice(-1000)}`);
        const result = { gate, clients, tps: Number(tps), latencyMs: Number(latency) };
        log(
          `pgbench ${gate}, ${clients} clients: ${int(result.tps)} commits/s, ${result.latencyMs} ms (load ${loadAverage()})`,
        );
        results.push(result);
        await client.query('TRUNCATE plants, events');
      }
    }
  } finally {
    await client.end();
    await stats.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  }
  return results;
}

// ---------------------------------------------------------------------------------------------

function checkoutName(): string {
  try {
    const head = execFileSync('git', ['-C', CHECKOUT, 'rev-parse', '--short', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    const dirty =
      execFileSync('git', ['-C', CHECKOUT, 'status', '--porcelain', '--untracked-files=no', '--', 'src'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
      }).trim() !== '';
    return `${CHECKOUT} (${head}${dirty ? ', src/ changed since' : ''})`;
  } catch {
    return CHECKOUT;
  }
}

const config = (r: { instances: number; writers: number }) =>
  r.instances === 1 ? `one instance × ${r.writers}` : `two instances × ${r.writers / 2}`;

function runRow(r: RunResult): string {
  const calls = (name: RegExp | string) =>
    r.statements
      .filter((s) => (typeof name === 'string' ? s.label === name : name.test(s.label)))
      .reduce((sum, s) => sum + s.calls, 0);
  const dispatcher = ['fan-out', 'claim', 'next due'].map((n) => int(calls(`dispatcher: ${n}`))).join(' / ');
  const delivered = r.delivered > 0 ? ` | ${int(r.delivered / r.seconds)}` : '';
  return `| ${r.index} | ${config(r)} | ${r.load.split(' ')[0]} | ${int(r.creates / r.seconds)} | ${fmt(r.p50, 1)} / ${fmt(r.p99, 1)} | ${int(r.batches / r.seconds)} (${(r.events / r.batches).toFixed(1)}) | ${int(calls(CREATE_BATCH) / r.seconds)} | ${int(r.commits / r.seconds)} | ${int(r.wakes / r.seconds)} (${(r.wakes / r.batches).toFixed(2)}) | ${dispatcher} (${int(calls(DISPATCHER))})${delivered} |`;
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      seconds: { type: 'string', default: '20' },
      rounds: { type: 'string', default: '2' },
      writers: { type: 'string', default: '32' },
      'delay-ms': { type: 'string', default: '3' },
      streams: { type: 'string', default: '0' },
      webhook: { type: 'boolean', default: false },
      pgbench: { type: 'boolean', default: false },
      'pgbench-seconds': { type: 'string', default: '10' },
      'fleet-writes': { type: 'boolean' }, // should `npm run bench -- --fleet-writes` pass it through
    },
  });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const totalWriters = Number(values.writers);
  const delayMs = Number(values['delay-ms']);
  const streamsEach = Number(values.streams);
  const webhook = values.webhook === true;
  const pgbenchSeconds = Number(values['pgbench-seconds']);
  if (!(totalWriters > 0 && totalWriters % 2 === 0))
    throw new Error('--writers: an even number, split over two instances');
  if (!existsSync(join(CHECKOUT, 'dist/cli.js')))
    throw new Error(`${CHECKOUT} has no dist/: build it first (npm run build)`);
  // The whole harness's bound: past it everything is stopped and the process exits 2.
  const deadlineMs =
    (rounds * 2 * (seconds + 60) + (values.pgbench ? GATES.length * 2 * (pgbenchSeconds + 20) : 0) + 300) * 1000;
  exitAfter(deadlineMs);

  const dir = mkdtempSync(join(tmpdir(), 'plant-store-fleet-writes-'));
  liveDirs.add(dir);
  const started = new Date();
  const loadBefore = loadAverage();
  log(`service: ${checkoutName()}; load average ${loadBefore}`);
  const pair = await startPair(delayMs);
  const stats = await connect(pair.primary);
  try {
    const settings = (
      await stats.query<{ name: string; setting: string }>(
        `SELECT name, setting FROM pg_settings WHERE name IN
          ('synchronous_commit', 'synchronous_standby_names', 'shared_buffers', 'max_connections', 'server_version')`,
      )
    ).rows;
    const standbySettings = (
      await pair.sql(
        pair.standby,
        "SELECT name, setting || coalesce(unit, '') AS setting FROM pg_settings WHERE name IN ('recovery_min_apply_delay', 'cluster_name')",
      )
    ).rows as Array<{ name: string; setting: string }>;
    log(
      `primary on ${pair.primary.port}: ${settings.map((s) => `${s.name}=${s.setting}`).join(', ')}; standby on ${pair.standby.port}: ${standbySettings.map((s) => `${s.name}=${s.setting}`).join(', ')}`,
    );
    const latencyBefore = await commitLatency(pair.primary);
    log(
      `one-row commit: ${latencyBefore.map((l) => `${l.mode} p50 ${fmt(l.p50, 1)} ms, p99 ${fmt(l.p99, 1)} ms`).join('; ')}`,
    );

    const ids = { next: 1 };
    const results: RunResult[] = [];
    let index = 0;
    for (let round = 1; round <= rounds; round++)
      for (const instances of [1, 2]) {
        index += 1;
        const result = await oneRun(pair, stats, dir, index, instances, totalWriters, seconds, ids, {
          streamsEach,
          webhook,
        });
        results.push(result);
        log(runRow(result));
      }
    const latencyAfter = await commitLatency(pair.primary);
    log(
      `one-row commit after the runs: ${latencyAfter.map((l) => `${l.mode} p50 ${fmt(l.p50, 1)} ms, p99 ${fmt(l.p99, 1)} ms`).join('; ')}`,
    );
    const pgbench = values.pgbench ? await pgbenchCeiling(pair, stats, dir, pgbenchSeconds) : [];

    // -------------------------------------------------------------------------------------------
    console.log(
      `\n${cpus().length} × ${cpus()[0]?.model.trim()}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, from ${started.toISOString()} to ${new Date().toISOString()}; load average (1, 5, 15 min) before ${loadBefore}, after ${loadAverage()}`,
    );
    console.log(`service: ${checkoutName()}`);
    console.log(
      `PostgreSQL 15 primary (synchronous_commit = remote_apply, synchronous_standby_names = ${STANDBY_NAME}) and standby (recovery_min_apply_delay = ${delayMs}ms); ${seconds} s per run after ${WARM_UP_MS / 1000} s of warm-up; ${totalWriters} writers in all${streamsEach > 0 ? `; ${streamsEach} change-feed readers per instance` : ''}`,
    );
    console.log(
      `one-row INSERT, its own commit, one connection (p50 / p99 ms): before the runs ${latencyBefore.map((l) => `${l.mode} ${fmt(l.p50, 1)} / ${fmt(l.p99, 1)}`).join(', ')}; after ${latencyAfter.map((l) => `${l.mode} ${fmt(l.p50, 1)} / ${fmt(l.p99, 1)}`).join(', ')}\n`,
    );
    console.log(
      `| run | configuration | load (1 min) at the start | creates/s | p50 / p99 per create (ms) | batches/s (rows each) | create statements/s | commits/s (xact_commit) | wakes/s (per batch) | dispatcher statements: fan-out / claim / next due (all) |${webhook ? ' deliveries/s |' : ''}`,
    );
    console.log(`|---|---|---|---|---|---|---|---|---|---|${webhook ? '---|' : ''}`);
    for (const r of results) console.log(runRow(r));

    const of = (instances: number) => results.filter((r) => r.instances === instances);
    const perSecond = (rs: RunResult[], f: (r: RunResult) => number) => rs.map((r) => f(r) / r.seconds);
    const one = perSecond(of(1), (r) => r.creates);
    const two = perSecond(of(2), (r) => r.creates);
    const batches = (rs: RunResult[]) =>
      `${int(mean(perSecond(rs, (r) => r.batches)))} (${(rs.reduce((s, r) => s + r.events, 0) / rs.reduce((s, r) => s + r.batches, 0)).toFixed(1)})`;
    console.log(
      `\n| one instance × ${totalWriters} | two instances × ${totalWriters / 2} | two ÷ one | p99 one → two (ms) | batches/s (rows each), one → two |`,
    );
    console.log('|---|---|---|---|---|');
    console.log(
      `| ${one.map(int).join(' / ')} | ${two.map(int).join(' / ')} | ${(mean(two) / mean(one)).toFixed(2)} | ${of(1)
        .map((r) => fmt(r.p99, 1))
        .join(' / ')} → ${of(2)
        .map((r) => fmt(r.p99, 1))
        .join(' / ')} | ${batches(of(1))} → ${batches(of(2))} |`,
    );

    console.log(
      '\nStatements of each run (pg_stat_statements of its database, in the window), run at least once a second:',
    );
    for (const r of results) {
      const often = r.statements.filter((s) => s.calls >= r.seconds);
      console.log(
        `- run ${r.index} (${config(r)}): ${often.map((s) => `${s.label} ${int(s.calls)} (${fmt(s.meanMs, 1)} ms)`).join('; ')}`,
      );
    }
    if (pgbench.length > 0) {
      console.log(
        `\npgbench on the same pair, the database alone: one statement = ${PGBENCH_ROWS} plants and their ${PGBENCH_ROWS} events, as the create batch's shape, ${pgbenchSeconds} s each (commits/s, mean latency ms):\n`,
      );
      console.log('| gate | 8 clients | 32 clients |');
      console.log('|---|---|---|');
      for (const [gate] of GATES) {
        const cell = (clients: number) => {
          const p = pgbench.find((x) => x.gate === gate && x.clients === clients)!;
          return `${int(p.tps)} (${p.latencyMs.toFixed(1)})`;
        };
        console.log(`| ${gate} | ${cell(8)} | ${cell(32)} |`);
      }
    }
  } finally {
    await stats.end().catch(() => {});
    await pair.close();
    livePairs.delete(pair);
    rmSync(dir, { recursive: true, force: true });
    liveDirs.delete(dir);
  }
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === THIS) {
  exitOnSignal();
  main(process.argv.slice(2)).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
