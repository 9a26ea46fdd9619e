// node --import tsx bench/failover.ts [--only throughput|async-loss|path-cost|timeline]
//
// PostgreSQL with more than one server, measured with the real parts of
// test/failover/cluster.ts (Patroni 3.0, etcd 3.4, HAProxy, PostgreSQL 15, all on 127.0.0.1) and the
// service as users run it (`node bin/plant-store.js serve` from dist/: `npm run build` first):
//
//   throughput  a 2-node cluster, the service on the multi-host URL; POST /plants (unique ids) and
//               DELETE /plants/{id}, 32 connections, 15 s each, with synchronous_mode on and off
//               (toggled with `patronictl edit-config`, the same cluster and service), on/off/on/off.
//   async-loss  8 writers (creating, deleting every other one) and a poller of the JSON feed; the
//               primary SIGKILLed; on the new leader: acknowledged creates missing, acknowledged
//               deletes undone, events seen before the kill missing or changed after. 3 runs with
//               synchronous 'off', 1 with 'on', a fresh cluster each; then 2 'off' and 1 'on' with
//               the primary's walsender stopped (SIGSTOP) 3 s before the kill, a replica behind
//               (`--stalled-only`: these alone).
//   path-cost   one PostgreSQL (a cluster's leader, asynchronous replica): GET /plants and POST
//               /plants with DATABASE_URL a single-host URL, the same host with
//               ?target_session_attrs=read-write (the routed path), and the 2-host URL; 3 rounds.
//   timeline    a synchronous cluster with HAProxy; one instance on the multi-host URL, one through
//               HAProxy; 3 × (kill the primary, the old node back, switchover to it).
//
// The load is plain HTTP/1.1 from this process (undici's Pool, a fixed number of connections each
// with one request in flight); no pinning: the machine has 2 cores and everything shares them.
// Every run is bounded in time; whatever this process started is stopped on the way out.
import { mkdtempSync, readFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import { type Cluster, type SynchronousMode, startCluster } from '../test/failover/cluster.js';
import { exitAfter, liveDirs, log, sleep, until } from './kit/process.js';
import { type Server as Service, mintTokenAsync, startService as serve } from './kit/server.js';
import { fmt, int, median, ms, percentile } from './kit/stats.js';

const SCENARIOS = ['throughput', 'async-loss', 'path-cost', 'timeline'] as const;
type Scenario = (typeof SCENARIOS)[number];
const CONNECTIONS = 32;
const WRITERS = 8;
const PATRONI = { ttl: 10, loopWait: 1, retryTimeout: 4 } as const;
/** The whole harness's limit: past it, everything is killed and the process exits. */
const DEADLINE_MS = 40 * 60_000;

const dir = mkdtempSync(join(tmpdir(), 'plant-store-failover-bench-'));
liveDirs.add(dir);
const out = (line = '') => console.log(line);
exitAfter(DEADLINE_MS);

/** `plant-store serve` from dist/, unpinned, its stdout and stderr in `<dir>/<name>-<time>.log`. */
const startService = (env: NodeJS.ProcessEnv, name: string): Promise<Service> =>
  serve(
    dir,
    {
      HOST: '127.0.0.1',
      RATE_LIMIT: 'off',
      MAX_EVENT_LOOP_DELAY: 'off', // a busy shared machine must not turn into 503s of the overload guard
      SHUTDOWN_GRACE: '4s',
      ...env,
    },
    { log: join(dir, `${name}-${Date.now()}.log`), stderrToLog: true },
  );

/** A token of plants:read,plants:write from `token create` on `databaseUrl`, bounded to 60 s. */
const mintToken = (databaseUrl: string): Promise<string> =>
  mintTokenAsync({ DATABASE_URL: databaseUrl }, 'bench', 'plants:read,plants:write', { timeoutMs: 60_000 });

// ---------------------------------------------------------------------------------------------
// Load at a fixed concurrency.

interface Request {
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  body?: string;
}

interface Run {
  requests: number;
  /** Answers other than 2xx, and requests with no answer. */
  failed: number;
  statuses: Record<string, number>;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** The 2xx answers' indexes (what next(i) was asked for), for a DELETE run after a POST run. */
  ok: number[];
}

/** `connections` clients, one request in flight each, for `seconds` or until next() answers undefined. */
async function drive(
  url: string,
  token: string,
  seconds: number,
  next: (i: number) => Request | undefined,
  connections = CONNECTIONS,
): Promise<Run> {
  const pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 60_000 });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const ok: number[] = [];
  let failed = 0;
  let counter = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  let lastAnswer = started;
  const worker = async () => {
    while (performance.now() < end) {
      const i = counter++;
      const request = next(i);
      if (!request) return;
      const sent = performance.now();
      let status: number;
      try {
        const answer = await pool.request({
          path: request.path,
          method: request.method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(request.body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: request.body,
          headersTimeout: 30_000,
          bodyTimeout: 30_000,
        });
        await answer.body.dump();
        status = answer.statusCode;
      } catch {
        status = 0;
      }
      const now = performance.now();
      lastAnswer = Math.max(lastAnswer, now);
      latencies.push(now - sent);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status >= 200 && status < 300) ok.push(i);
      else failed++;
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  await pool.close();
  const elapsed = (lastAnswer - started) / 1000;
  return {
    requests: latencies.length,
    failed,
    statuses,
    seconds: elapsed,
    rps: latencies.length / elapsed,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    ok,
  };
}

const posts =
  (base: number) =>
  (i: number): Request => ({ method: 'POST', path: '/plants', body: `{"id":${base + i},"name":"bench plant"}` });
const deletes =
  (ids: readonly number[]) =>
  (i: number): Request | undefined =>
    i < ids.length ? { method: 'DELETE', path: `/plants/${ids[i]}` } : undefined;
const gets = (): Request => ({ method: 'GET', path: '/plants?limit=10' });

const runCells = (r: Run) =>
  `${int(r.rps)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${int(r.requests)}${r.failed ? ` (${r.failed} failed: ${JSON.stringify(r.statuses)})` : ''}`;

async function newCluster(synchronous: SynchronousMode, haproxy: boolean): Promise<Cluster> {
  const started = Date.now();
  const cluster = await startCluster({ nodes: 2, synchronous, haproxy, ...PATRONI });
  const leader = await cluster.waitForLeader(30_000);
  await cluster.psql(leader.name, 'CREATE DATABASE plants');
  log(
    `cluster (synchronous ${synchronous}, HAProxy ${haproxy}) ready in ${Date.now() - started} ms, leader ${leader.name}`,
  );
  return cluster;
}

/** Bytes of WAL the leader wrote since `from` (an LSN), and its LSN now. */
async function walSince(cluster: Cluster, from?: string): Promise<{ lsn: string; bytes: number }> {
  const leader = await cluster.waitForLeader(30_000);
  const [row] = await cluster.psql<{ lsn: string; bytes: string | null }>(
    leader.name,
    'SELECT pg_current_wal_lsn()::text AS lsn, pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS bytes',
    [from ?? '0/0'],
  );
  return { lsn: row!.lsn, bytes: Number(row!.bytes) };
}

// ---------------------------------------------------------------------------------------------
// 1. Throughput and p99 with a synchronous standby against none.

async function setSynchronous(cluster: Cluster, on: boolean): Promise<void> {
  await cluster.patronictl('edit-config', '--force', '-q', '-s', `synchronous_mode=${on}`);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const leader = await cluster.waitForLeader(30_000);
    const [row] = await cluster.psql<{ names: string; sync: string | null }>(
      leader.name,
      "SELECT current_setting('synchronous_standby_names') AS names, (SELECT string_agg(sync_state, ',') FROM pg_stat_replication) AS sync",
    );
    if (on ? row?.names !== '' && row?.sync === 'sync' : row?.names === '' && row?.sync === 'async') {
      log(`synchronous_mode ${on}: synchronous_standby_names '${row?.names}', pg_stat_replication ${row?.sync}`);
      return;
    }
    if (Date.now() > deadline) throw new Error(`synchronous_mode=${on} not applied: ${JSON.stringify(row)}`);
    await sleep(250);
  }
}

async function throughput(): Promise<void> {
  const seconds = 15;
  const cluster = await newCluster('on', false);
  let service: Service | undefined;
  try {
    const url = cluster.multiHostUrl('plants');
    service = await startService({ DATABASE_URL: url }, 'throughput');
    const token = await mintToken(url);
    let base = 1_000_000;
    await drive(service.url, token, 3, posts(base)); // warm-up, unrecorded
    base += 10_000_000;
    const rows: string[] = [];
    const results: Record<'on' | 'off', { post: Run[]; del: Run[]; walPerCreate: number[] }> = {
      on: { post: [], del: [], walPerCreate: [] },
      off: { post: [], del: [], walPerCreate: [] },
    };
    for (let round = 1; round <= 2; round++) {
      for (const mode of ['on', 'off'] as const) {
        await setSynchronous(cluster, mode === 'on');
        await sleep(1000);
        const wal = await walSince(cluster);
        const post = await drive(service.url, token, seconds, posts(base));
        const written = await walSince(cluster, wal.lsn);
        const ids = post.ok.map((i) => base + i);
        base += 10_000_000;
        const del = await drive(service.url, token, seconds, deletes(ids));
        results[mode].post.push(post);
        results[mode].del.push(del);
        results[mode].walPerCreate.push(written.bytes / post.requests);
        for (const [what, r] of [
          ['POST /plants', post],
          ['DELETE /plants/{id}', del],
        ] as const) {
          rows.push(`| ${round} | ${mode} | ${what} | ${runCells(r)} | ${r.seconds.toFixed(1)} |`);
          log(rows.at(-1)!);
        }
      }
    }
    out(`### throughput (${CONNECTIONS} connections, ${seconds} s per run, load average ${loadavg()[0]!.toFixed(2)})`);
    out('| round | synchronous_mode | request | req/s | p50 ms | p99 ms | requests | s |');
    out('| --- | --- | --- | --- | --- | --- | --- | --- |');
    for (const line of rows) out(line);
    for (const mode of ['on', 'off'] as const) {
      const r = results[mode];
      out(
        `- ${mode}: median POST ${int(median(r.post.map((x) => x.rps)))} req/s p99 ${median(r.post.map((x) => x.p99)).toFixed(2)} ms; DELETE ${int(median(r.del.map((x) => x.rps)))} req/s p99 ${median(r.del.map((x) => x.p99)).toFixed(2)} ms; WAL per create ${r.walPerCreate.map((b) => int(b)).join(', ')} bytes`,
      );
    }
    const perCreate = median([...results.on.walPerCreate, ...results.off.walPerCreate]);
    out(
      `- maximum_lag_on_failover 1 MB (1,048,576 bytes) ≈ ${int(1_048_576 / perCreate)} creates at ${int(perCreate)} bytes of WAL each`,
    );
  } finally {
    await service?.stop();
    await cluster.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// 2 and 4. Writers, a feed poller, a kill.

interface Outcome {
  readonly started: number;
  readonly at: number;
  readonly status: number;
  readonly what: 'POST' | 'DELETE';
  readonly via: string;
}

/** Writers over HTTP (as test/failover/patroni.test.ts): each creates plants of its own ids and deletes every other one. */
class Load {
  readonly outcomes: Outcome[] = [];
  /** id → when its create was acknowledged. */
  readonly created = new Map<number, number>();
  /** id → when its delete was acknowledged. */
  readonly deleted = new Map<number, number>();
  private stopped = false;
  private readonly runs: Array<Promise<void>> = [];

  constructor(
    services: ReadonlyArray<{ name: string; service: Service }>,
    private readonly token: string,
    writers: number,
    private readonly base: number,
  ) {
    for (let w = 0; w < writers; w++) this.runs.push(this.writer(services[w % services.length]!, w));
  }

  private async writer(target: { name: string; service: Service }, w: number): Promise<void> {
    for (let i = 0; !this.stopped; i++) {
      const id = this.base + 1_000_000 * (w + 1) + i;
      const made = await this.call(target, 'POST', '/plants', `{"id":${id},"name":"plant ${id}"}`);
      if (made === 200) this.created.set(id, Date.now());
      if (made === 200 && i % 2 === 1) {
        const gone = await this.call(target, 'DELETE', `/plants/${id}`);
        if (gone === 204) this.deleted.set(id, Date.now());
      }
      if (made !== 200) await sleep(100);
    }
  }

  private async call(
    target: { name: string; service: Service },
    method: 'POST' | 'DELETE',
    path: string,
    body?: string,
  ): Promise<number> {
    const started = Date.now();
    let status: number;
    try {
      const response = await fetch(`${target.service.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body,
        signal: AbortSignal.timeout(60_000),
      });
      await response.arrayBuffer();
      status = response.status;
    } catch {
      status = 0;
    }
    this.outcomes.push({ started, at: Date.now(), status, what: method, via: target.name });
    return status;
  }

  failures(from: number, to = Infinity): Outcome[] {
    return this.outcomes.filter((o) => o.at >= from && o.started <= to && o.status !== 200 && o.status !== 204);
  }

  /** When the first create sent after `after` (through `via`) was acknowledged. */
  firstWriteAfter(after: number, via?: string): number | undefined {
    const found = this.outcomes.filter(
      (o) => o.started > after && o.status === 200 && o.what === 'POST' && (via === undefined || o.via === via),
    );
    return found.length ? Math.min(...found.map((o) => o.at)) : undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.runs);
  }
}

const EVENT = /\{"id":(\d+),"type":"[^"]+","data":\{[^}]*\},"createdAt":"[^"]+"\}/g;

/** A poller of the JSON feed (`GET /events?after=…`, Accept: application/json): every event it saw, id → text. */
class FeedPoller {
  readonly seen = new Map<string, string>();
  private after = '0';
  private stopped = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly service: Service,
    private readonly token: string,
  ) {
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const page = await fetch(`${this.service.url}/events?after=${this.after}&limit=1000`, {
          headers: { authorization: `Bearer ${this.token}`, accept: 'application/json' },
          signal: AbortSignal.timeout(30_000),
        });
        const text = await page.text();
        if (page.status === 200) {
          for (const m of text.matchAll(EVENT)) {
            this.seen.set(m[1]!, m[0]);
            this.after = m[1]!;
          }
        }
      } catch {
        // the database moving: try again
      }
      await sleep(100);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** The whole feed from the start, id → text. */
async function wholeFeed(service: Service, token: string): Promise<Map<string, string>> {
  const feed = new Map<string, string>();
  let after = '0';
  for (;;) {
    const page = await fetch(`${service.url}/events?after=${after}&limit=1000`, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
      signal: AbortSignal.timeout(30_000),
    });
    if (page.status !== 200) throw new Error(`GET /events: ${page.status}`);
    const found = [...(await page.text()).matchAll(EVENT)];
    if (found.length === 0) return feed;
    for (const m of found) feed.set(m[1]!, m[0]);
    after = found.at(-1)![1]!;
  }
}

interface Loss {
  createsChecked: number;
  createsLost: number[];
  deletesChecked: number;
  deletesUndone: number[];
  eventsChecked: number;
  eventsMissing: number;
  eventsChanged: number;
}

/** Against the leader now: what was acknowledged (or seen in the feed) before `killedAt`. */
async function lossAfter(
  cluster: Cluster,
  load: Load,
  seenBefore: Map<string, string>,
  killedAt: number,
  service: Service,
  token: string,
): Promise<Loss> {
  const leader = await cluster.waitForLeader(30_000);
  const rows = await cluster.psql<{ id: string }>(
    cluster.nodeUrl(leader.name, 'plants'),
    'SELECT id::text FROM plants',
  );
  const held = new Set(rows.map((r) => Number(r.id)));
  const creates = [...load.created].filter(([id, at]) => at < killedAt && !load.deleted.has(id)).map(([id]) => id);
  const deletes = [...load.deleted].filter(([, at]) => at < killedAt).map(([id]) => id);
  const feed = await wholeFeed(service, token);
  let missing = 0;
  let changed = 0;
  for (const [id, text] of seenBefore) {
    const now = feed.get(id);
    if (now === undefined) missing++;
    else if (now !== text) changed++;
  }
  return {
    createsChecked: creates.length,
    createsLost: creates.filter((id) => !held.has(id)),
    deletesChecked: deletes.length,
    deletesUndone: deletes.filter((id) => held.has(id)),
    eventsChecked: seenBefore.size,
    eventsMissing: missing,
    eventsChanged: changed,
  };
}

/** Replication lag (bytes of WAL the replica has not flushed / replayed), sampled on the leader. */
class LagSampler {
  readonly samples: Array<{ at: number; flush: number; replay: number }> = [];
  private stopped = false;
  private readonly loop: Promise<void>;
  constructor(private readonly cluster: Cluster) {
    this.loop = this.run();
  }
  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        const leader = await this.cluster.leader();
        if (leader) {
          const [row] = await this.cluster.psql<{ flush: string | null; replay: string | null }>(
            leader.name,
            'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::text AS flush, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::text AS replay FROM pg_stat_replication',
          );
          if (row) this.samples.push({ at: Date.now(), flush: Number(row.flush), replay: Number(row.replay) });
        }
      } catch {
        // the leader killed
      }
      await sleep(200);
    }
  }
  before(at: number) {
    const list = this.samples.filter((s) => s.at < at);
    return {
      count: list.length,
      maxFlush: Math.max(0, ...list.map((s) => s.flush)),
      medianFlush: list.length ? median(list.map((s) => s.flush)) : 0,
      last: list.at(-1),
    };
  }
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }
}

/** One fresh cluster, the service on the multi-host URL, 8 writers, the primary killed; what was lost. */
async function lossRun(synchronous: SynchronousMode, run: number, stallMs = 0): Promise<string> {
  const cluster = await newCluster(synchronous, false);
  let service: Service | undefined;
  let load: Load | undefined;
  let poller: FeedPoller | undefined;
  let lag: LagSampler | undefined;
  let stalled: number | undefined;
  try {
    const url = cluster.multiHostUrl('plants');
    service = await startService({ DATABASE_URL: url, DATABASE_FAILOVER_WAIT: '20s' }, `loss-${synchronous}-${run}`);
    const token = await mintToken(url);
    load = new Load([{ name: 'multi-host', service }], token, WRITERS, 0);
    poller = new FeedPoller(service, token);
    lag = new LagSampler(cluster);
    await sleep(8000); // steady load
    if (stallMs > 0) {
      // A replica falling behind (a slow link, a busy standby): the primary's walsender stopped, so
      // the WAL of what commits meanwhile stays on the primary. Asynchronous commits go on being
      // acknowledged; synchronous ones wait for the standby.
      const primary = await cluster.waitForLeader(10_000);
      const [sender] = await cluster.psql<{ pid: number }>(primary.name, 'SELECT pid FROM pg_stat_replication');
      if (!sender) throw new Error('no walsender on the leader');
      stalled = sender.pid;
      process.kill(stalled, 'SIGSTOP');
      await sleep(stallMs);
    }
    const seenBefore = new Map(poller.seen);
    const { node: killed, at: killedAt } = await cluster.killPrimary(); // SIGKILL ends a stopped walsender too
    const leader = await cluster.waitForLeader(60_000, { not: killed.name });
    const leaderAt = Date.now();
    await until(() => load!.firstWriteAfter(killedAt) !== undefined, 45_000, 'a create acknowledged after the kill');
    const firstWrite = load.firstWriteAfter(killedAt)!;
    await sleep(2000);
    await load.stop();
    await poller.stop();
    await lag.stop();
    const loss = await lossAfter(cluster, load, seenBefore, killedAt, service, token);
    const lagged = lag.before(killedAt);
    const lostAges = loss.createsLost.map((id) => killedAt - load!.created.get(id)!);
    const failures = load.failures(killedAt);
    const statuses: Record<string, number> = {};
    for (const f of failures) statuses[f.status] = (statuses[f.status] ?? 0) + 1;
    const line =
      `| ${synchronous} | ${stallMs ? `${(stallMs / 1000).toFixed(1)} s` : 'no'} | ${run} | ${int(loss.createsLost.length)} of ${int(loss.createsChecked)}` +
      `${lostAges.length ? ` (acknowledged ${int(Math.min(...lostAges))}–${int(Math.max(...lostAges))} ms before the kill)` : ''}` +
      ` | ${int(loss.deletesUndone.length)} of ${int(loss.deletesChecked)} | ${int(loss.eventsMissing)} missing, ${int(loss.eventsChanged)} changed, of ${int(loss.eventsChecked)}` +
      ` | ${int(lagged.medianFlush)} / ${int(lagged.maxFlush)} / ${int(lagged.last?.flush ?? NaN)} (${lagged.count})` +
      ` | ${ms(leaderAt - killedAt)} | ${ms(firstWrite - killedAt)} | ${failures.length} ${JSON.stringify(statuses)} |`;
    log(`${line}  new leader ${leader.name}\n${cluster.formatTimeline('kill')}`);
    const early = load.outcomes.filter((o) => o.started > killedAt && o.status === 200 && o.at < leaderAt);
    if (early.length)
      log(`acknowledged after the kill, before the new leader was seen: ${JSON.stringify(early.slice(0, 5))}`);
    return line;
  } finally {
    if (stalled !== undefined)
      try {
        process.kill(stalled, 'SIGCONT'); // gone with its primary, unless the run failed before the kill
      } catch {
        // gone
      }
    await load?.stop();
    await poller?.stop();
    await lag?.stop();
    await service?.stop();
    await cluster.stop();
  }
}

async function asyncLoss(): Promise<void> {
  const lines: string[] = [];
  const stallOnly = process.argv.includes('--stalled-only');
  if (!stallOnly) {
    for (let run = 1; run <= 3; run++) lines.push(await lossRun('off', run));
    lines.push(await lossRun('on', 1));
  }
  for (let run = 1; run <= 2; run++) lines.push(await lossRun('off', run, 3000));
  lines.push(await lossRun('on', 1, 3000));
  out(
    `### async-loss (${WRITERS} writers, SIGKILL of the primary after 8 s of load; load average ${loadavg()[0]!.toFixed(2)})`,
  );
  out(
    '| synchronous | walsender stopped before the kill | run | acknowledged creates lost | acknowledged deletes undone | events seen before the kill | replica flush lag before the kill, bytes: median / max / last (samples) | kill → new leader | kill → first create acknowledged | requests failed |',
  );
  out('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const line of lines) out(line);
}

// ---------------------------------------------------------------------------------------------
// 3. The multi-host connection path on an ordinary request.

async function pathCost(): Promise<void> {
  const seconds = 10;
  const cluster = await newCluster('off', false);
  try {
    const leader = await cluster.waitForLeader(30_000);
    const single = cluster.nodeUrl(leader.name, 'plants');
    const variants = [
      ['single host', single],
      ['single host, target_session_attrs=read-write', `${single}?target_session_attrs=read-write`],
      ['2 hosts, target_session_attrs=read-write', cluster.multiHostUrl('plants')],
    ] as const;
    const token = await mintToken(single);
    const results = new Map<string, { get: Run[]; post: Run[] }>(
      variants.map(([name]) => [name, { get: [], post: [] }]),
    );
    const rows: string[] = [];
    let base = 1_000_000_000;
    for (let round = 1; round <= 3; round++) {
      for (const [name, url] of variants) {
        const service = await startService({ DATABASE_URL: url }, 'path-cost');
        try {
          await drive(service.url, token, 2, posts(base)); // warm-up (and plants for the GETs)
          base += 10_000_000;
          await drive(service.url, token, 2, gets);
          const get = await drive(service.url, token, seconds, gets);
          const post = await drive(service.url, token, seconds, posts(base));
          base += 10_000_000;
          results.get(name)!.get.push(get);
          results.get(name)!.post.push(post);
          rows.push(`| ${round} | ${name} | GET /plants?limit=10 | ${runCells(get)} |`);
          log(rows.at(-1)!);
          rows.push(`| ${round} | ${name} | POST /plants | ${runCells(post)} |`);
          log(rows.at(-1)!);
        } finally {
          await service.stop();
        }
      }
    }
    out(`### path-cost (${CONNECTIONS} connections, ${seconds} s per run, load average ${loadavg()[0]!.toFixed(2)})`);
    out('| round | DATABASE_URL | request | req/s | p50 ms | p99 ms | requests |');
    out('| --- | --- | --- | --- | --- | --- | --- |');
    for (const line of rows) out(line);
    out(
      '| DATABASE_URL | GET req/s median (min–max) | GET p99 median (min–max) | POST req/s median (min–max) | POST p99 median (min–max) |',
    );
    out('| --- | --- | --- | --- | --- |');
    const span = (values: number[], show: (n: number) => string) =>
      `${show(median(values))} (${show(Math.min(...values))}–${show(Math.max(...values))})`;
    for (const [name] of variants) {
      const r = results.get(name)!;
      out(
        `| ${name} | ${span(
          r.get.map((x) => x.rps),
          int,
        )} | ${span(
          r.get.map((x) => x.p99),
          fmt,
        )} | ${span(
          r.post.map((x) => x.rps),
          int,
        )} | ${span(
          r.post.map((x) => x.p99),
          fmt,
        )} |`,
      );
    }
  } finally {
    await cluster.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// 4. Timelines: failover and switchover.

async function timeline(): Promise<void> {
  const cluster = await newCluster('on', true);
  const services: Array<{ name: string; service: Service }> = [];
  let load: Load | undefined;
  let poller: FeedPoller | undefined;
  try {
    const config = await cluster.effectiveConfig();
    const direct = cluster.multiHostUrl('plants');
    const common = { DATABASE_FAILOVER_WAIT: '20s' };
    services.push({
      name: 'multi-host',
      service: await startService({ ...common, DATABASE_URL: direct }, 'timeline-direct'),
    });
    services.push({
      name: 'HAProxy',
      service: await startService(
        { ...common, DATABASE_URL: `${cluster.haproxyUrl('plants')}?target_session_attrs=read-write` },
        'timeline-haproxy',
      ),
    });
    const token = await mintToken(direct);
    load = new Load(services, token, WRITERS, 0);
    poller = new FeedPoller(services[0]!.service, token);
    const failovers: string[] = [];
    const switchovers: string[] = [];
    for (let cycle = 1; cycle <= 3; cycle++) {
      await sleep(5000);
      const seenBefore = new Map(poller.seen);
      const { node: killed, at: killedAt } = await cluster.killPrimary();
      await cluster.waitForLeader(60_000, { not: killed.name });
      const leaderAt = Date.now();
      await cluster.waitForHaproxyOnLeader(30_000);
      const haproxyAt = Date.now();
      await until(
        () => services.every((s) => load!.firstWriteAfter(killedAt, s.name) !== undefined),
        45_000,
        'a create acknowledged after the kill on each instance',
      );
      const first = services.map((s) => load!.firstWriteAfter(killedAt, s.name)! - killedAt);
      const failed = load.failures(killedAt).length;
      await sleep(2000);
      const loss = await lossAfter(cluster, load, seenBefore, killedAt, services[0]!.service, token);
      failovers.push(
        `| ${cycle} | ${ms(leaderAt - killedAt)} | ${ms(haproxyAt - killedAt)} | ${ms(first[0]!)} | ${ms(first[1]!)} | ${failed} | ${loss.createsLost.length} of ${int(loss.createsChecked)}, ${loss.deletesUndone.length} of ${int(loss.deletesChecked)}, ${loss.eventsMissing + loss.eventsChanged} of ${int(loss.eventsChecked)} |`,
      );
      log(failovers.at(-1)!);
      log(`\n${cluster.formatTimeline('kill')}`);

      // The old node back, then a switchover to it.
      await cluster.restartNode(killed.name);
      const rejoinStarted = Date.now();
      await cluster.waitForReplicaStreaming(killed.name, 120_000, { sync: true });
      const rejoined = Date.now() - rejoinStarted;
      await sleep(3000);
      const requested = Date.now();
      await cluster.switchover(killed.name, 60_000);
      const switchedAt = Date.now();
      await cluster.waitForHaproxyOnLeader(30_000);
      const haproxySwitchedAt = Date.now();
      await sleep(3000);
      const during = load.outcomes.filter((o) => o.started >= requested && o.started <= switchedAt + 3000);
      const slowest = Math.max(...during.map((o) => o.at - o.started));
      const failedSwitch = load.failures(requested, switchedAt + 3000).length;
      switchovers.push(
        `| ${cycle} | ${ms(switchedAt - requested)} | ${ms(haproxySwitchedAt - requested)} | ${failedSwitch} of ${int(during.length)} | ${ms(slowest)} | ${ms(rejoined)} |`,
      );
      log(switchovers.at(-1)!);
    }
    await load.stop();
    await poller.stop();
    out(
      `### timeline (Patroni ttl ${String(config.ttl)} s, loop_wait ${String(config.loop_wait)} s, retry_timeout ${String(config.retry_timeout)} s, synchronous_mode ${String(config.synchronous_mode)}, maximum_lag_on_failover ${String(config.maximum_lag_on_failover)}; HAProxy check GET /primary inter 1s fall 2 rise 1, on-marked-down shutdown-sessions; load average ${loadavg()[0]!.toFixed(2)})`,
    );
    out(
      '| failover | kill → new leader seen | kill → HAProxy on it | kill → first create acknowledged (multi-host) | (HAProxy) | requests failed | lost: creates, deletes, events |',
    );
    out('| --- | --- | --- | --- | --- | --- | --- |');
    for (const line of failovers) out(line);
    out(
      '| switchover | requested → new leader seen | requested → HAProxy on it | requests failed (of those sent meanwhile) | slowest request sent meanwhile | old node back to sync standby before it |',
    );
    out('| --- | --- | --- | --- | --- | --- |');
    for (const line of switchovers) out(line);
    out(
      `- ${int(load.created.size)} creates and ${int(load.deleted.size)} deletes acknowledged in all; statuses other than 2xx: ${JSON.stringify(
        load
          .failures(0)
          .reduce<Record<string, number>>((acc, o) => ((acc[o.status] = (acc[o.status] ?? 0) + 1), acc), {}),
      )}`,
    );
    for (const { name, service } of services) {
      const moves = readFileSync(service.log, 'utf8')
        .split('\n')
        .filter((l) => l.includes('database: writing to')).length;
      out(`- ${name}: ${moves} 'database: writing to …' lines`);
    }
  } finally {
    await load?.stop();
    await poller?.stop();
    for (const { service } of services) await service.stop();
    await cluster.stop();
  }
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const at = process.argv.indexOf('--only');
  const only = at >= 0 ? (process.argv[at + 1] as Scenario) : undefined;
  if (only !== undefined && !SCENARIOS.includes(only))
    throw new Error(`--only ${String(only)}: one of ${SCENARIOS.join(', ')}`);
  const scenarios: Record<Scenario, () => Promise<void>> = {
    throughput,
    'async-loss': asyncLoss,
    'path-cost': pathCost,
    timeline,
  };
  out(
    `Date: ${new Date().toISOString()}. Machine: ${cpus().length} cores (${cpus()[0]?.model.trim()}), Node ${process.version}, load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}.`,
  );
  for (const name of SCENARIOS) {
    if (only !== undefined && name !== only) continue;
    const started = Date.now();
    log(`${name}: start`);
    await scenarios[name]();
    log(`${name}: ${((Date.now() - started) / 1000).toFixed(0)} s`);
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
