// The event side under load: webhooks and the change feed, on one engine at a time.
// Run by `npm run bench` after each engine's own scenarios (BENCH_SKIP=events leaves it out), or
// alone:
//
//   node --import tsx bench/events.ts                  # SQLite, then PostgreSQL
//   BENCH_SKIP=postgres node --import tsx bench/events.ts
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_events BENCH_SKIP=sqlite node --import tsx bench/events.ts
//
// What it measures, with the service pinned to core 0 and everything that makes load (wrk, the
// node load generators, the webhook receiver bench/receiver.mjs) pinned to core 1:
//
//  1. POST /plants with one subscribed webhook against POST with none: the same server, warmed
//     by 3 s of creates without and 3 s with the webhook, then wrk -t1 -c50, BENCH_ROUNDS
//     alternating rounds of BENCH_DURATION seconds (medians). The webhook
//     (added with `plant-store webhooks add`, removed after each run) points at the receiver, which
//     answers 200 at once. After each webhook run the harness waits until the receiver has every
//     plant created (at most 120 s; then the webhook goes, and its pending deliveries with it), and
//     reports how far behind the deliveries were when the load stopped.
//  2. Commit-to-receiver latency at a steady BENCH_EVENTS_RATE creates/s (default 1,000) for
//     BENCH_EVENTS_SECONDS (default 10), after 2 s of the same load unrecorded (steady state: the
//     webhook's first connections and the delivery path's first runs are behind it): a node load
//     generator sends POSTs evenly (open loop, over 64 keep-alive connections it opens before its
//     schedule starts); for each plant, the receiver's arrival time minus the event's
//     created_at in the database (the store's clock: Date.now() of the server on SQLite, now() of
//     the transaction on PostgreSQL; both are this machine's clock), and minus the time its 200
//     reached the load generator.
//  3. Deliveries/s: BENCH_EVENTS_BACKLOG plants (default 20,000) imported with `plant-store import`
//     while no server runs (the import writes each event and its delivery), then the server starts;
//     rate = deliveries between the receiver's first and last arrival / that time.
//  4. The change feed: BENCH_EVENTS_STREAMS (default 1,000) GET /events streams on one fresh server
//     (5 per token: tokens with plants:read,plants:admin, so every stream sees every plant; minted
//     in this process with the service's TokenService, as a CLI process per token is too slow), the
//     server's VmRSS before and after they are all open and have their `: connected` line; then
//     BENCH_EVENTS_FANOUT creates (default 10), 1 s apart, and for each stream and event the time
//     from sending the POST to the stream receiving the event (one process, one clock).
//  5. The change feed as pages of JSON: bench/event-pages.ts (which says what it measures, and runs
//     alone too).
//
// Settings: BENCH_DURATION (seconds per wrk run, default 10), BENCH_ROUNDS (default 3),
// BENCH_DATABASE_URL (PostgreSQL to use; default: a throwaway embedded server),
// BENCH_SKIP=sqlite,postgres and, to leave out one part, events-ab,events-latency,events-backlog,events-feed,events-pages;
// BENCH_EVENTS_RATE, BENCH_EVENTS_SECONDS, BENCH_EVENTS_BACKLOG, BENCH_EVENTS_STREAMS, BENCH_EVENTS_FANOUT.
// Server settings: WEBHOOK_ALLOW_PRIVATE=1 (the receiver is on 127.0.0.1), RATE_LIMIT=off.
// On a PostgreSQL server with autovacuum off, VACUUM ANALYZE runs before each measured run, as
// autovacuum would (the dead rows of one run's deliveries otherwise slow the next).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import { type FeedResult, type PaceResult, role } from './event-load.js';
import { pagesScenario } from './event-pages.js';
import { exitOnSignal, loadAverage, rss, sleep } from './kit/process.js';
import { type Server, cli as run, mintToken, onBenchPostgres, start, startService as serve } from './kit/server.js';
import { fmt, int, percentile } from './kit/stats.js';
import { DURATION, type WrkResult, combine, wrk } from './kit/wrk.js';

const THIS = fileURLToPath(import.meta.url);
export const RECEIVER = fileURLToPath(new URL('./receiver.mjs', import.meta.url));
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATE = Number(process.env.BENCH_EVENTS_RATE ?? 1000);
/** Seconds of the same paced load before the measured ones. */
const RATE_WARM_UP = 2;
const RATE_SECONDS = Number(process.env.BENCH_EVENTS_SECONDS ?? 10);
const BACKLOG = Number(process.env.BENCH_EVENTS_BACKLOG ?? 20_000);
const STREAMS = Number(process.env.BENCH_EVENTS_STREAMS ?? 1000);
const FANOUT = Number(process.env.BENCH_EVENTS_FANOUT ?? 10);
const STREAMS_PER_TOKEN = 5; // docs/api.md#the-change-feed: at most 5 open streams per token
const WARM_UP = 3; // seconds of unrecorded load after a server starts
const DRAIN_MS = 120_000; // the longest wait for a run's deliveries to reach the receiver
const SKIP = new Set((process.env.BENCH_SKIP ?? '').split(',').filter(Boolean));

/** The service pinned to core 0; WEBHOOK_ALLOW_PRIVATE=1, the receiver being on 127.0.0.1. */
const startService = (dir: string, env: NodeJS.ProcessEnv): Promise<Server> =>
  serve(dir, { RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1', ...env }, { cores: '0' });
const cli = (args: string[], env: NodeJS.ProcessEnv): string => run(args, { WEBHOOK_ALLOW_PRIVATE: '1', ...env });

/**
 * Many tokens at once, in this process through the service's own TokenService (what `token create`
 * runs): the change feed needs one token per 5 streams, and a CLI process per token would take
 * minutes.
 */
async function mintTokens(env: NodeJS.ProcessEnv, count: number, subject: string, scopes: string[]): Promise<string[]> {
  const { parseDatabaseUrl } = await import('../src/config.js');
  const { openStore } = await import('../src/store/open-store.js');
  const { TokenService } = await import('../src/auth/token.service.js');
  const store = await openStore(parseDatabaseUrl(env.DATABASE_URL!));
  try {
    await store.migrate();
    const service = new TokenService(store);
    const tokens: string[] = [];
    for (let i = 0; i < count; i++) tokens.push((await service.create({ subject, scopes })).token);
    return tokens;
  } finally {
    await store.close();
  }
}

const addWebhook = (env: NodeJS.ProcessEnv, subject: string, url: string): string =>
  (JSON.parse(cli(['webhooks', 'add', '--subject', subject, '--url', url, '--json'], env)) as { id: string }).id;
const removeWebhook = (env: NodeJS.ProcessEnv, id: string): void => void cli(['webhooks', 'remove', id], env);

export interface ReceiverStats {
  count: number;
  unique: number;
  first: number;
  last: number;
}
async function receiverCall<T>(receiver: Server, path: string): Promise<T> {
  return (await (await fetch(`${receiver.url}${path}`)).json()) as T;
}
export const stats = (receiver: Server): Promise<ReceiverStats> => receiverCall<ReceiverStats>(receiver, '/__stats');
export const resetReceiver = (receiver: Server): Promise<unknown> => receiverCall(receiver, '/__reset');

/** Waits until the receiver has `unique` plants, or the deadline passes; answers its stats then. */
export async function waitForDeliveries(receiver: Server, unique: number, timeoutMs: number): Promise<ReceiverStats> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await stats(receiver);
    if (s.unique >= unique || Date.now() > deadline) return s;
    await sleep(25);
  }
}

/**
 * Lua for wrk: POST /plants with ids `<prefix><n as 9 digits>`, built as text. Lua's numbers are
 * doubles and print with 14 significant digits, so arithmetic on a large base would repeat ids.
 */
export function postScript(dir: string, token: string, prefix: string): string {
  const file = join(dir, `post-${prefix}.lua`);
  writeFileSync(
    file,
    `wrk.headers["Authorization"] = "Bearer ${token}"\nwrk.headers["Content-Type"] = "application/json"\nlocal n = 0\n` +
      `request = function()\n  n = n + 1\n  return wrk.format("POST", "/plants", nil, '{"id":${prefix}' .. string.format("%09d", n) .. ',"name":"bench plant"}')\nend\n`,
  );
  return file;
}

/** Ids of this run: 19 digits from 7…, distinct per run (the second of the run) and per use. */
const runStamp = String(Math.floor(Date.now() / 1000) % 1_000_000).padStart(6, '0');
let uses = 0;
export const nextPrefix = (): string => `7${runStamp}${String(++uses).padStart(3, '0')}`;

export interface EventResults {
  /** Rows of bench.ts's table: engine, scenario, then 7 cells. */
  readonly rows: string[];
  /** Load averages and other notes on each scenario, for below the table. */
  readonly notes: string[];
}

/** The event side's scenarios on one engine; `env` has its DATABASE_URL. */
export async function eventScenarios(engine: string, env: NodeJS.ProcessEnv): Promise<EventResults> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-events-'));
  const rows: string[] = [];
  const notes: string[] = [];
  const row = (scenario: string, cells: string[]): void => {
    rows.push(`| ${[engine, scenario, ...cells].join(' | ')} |`);
    console.error(rows.at(-1));
  };
  /** A row of latencies in ms: its first cell, then p50 and p99 of `values`. */
  const latencyRow = (scenario: string, first: string, values: number[]): void =>
    row(scenario, [first, fmt(percentile(values, 50)), fmt(percentile(values, 99)), '—', '—', '—', '—']);
  const note = (text: string): void => {
    notes.push(`${engine}: ${text}`);
    console.error(`  ${engine}: ${text}`);
  };
  const servers: Server[] = [];
  const track = (server: Server): Server => (servers.push(server), server);
  let vacuumNoted = false;
  /** Before each measured run: VACUUM ANALYZE where autovacuum is off (vacuumIfNoAutovacuum). */
  const vacuum = async (): Promise<void> => {
    if ((await vacuumIfNoAutovacuum(env)) && !vacuumNoted) {
      vacuumNoted = true;
      note('autovacuum is off on this server: VACUUM ANALYZE before each measured run, as autovacuum would');
    }
  };
  try {
    cli(['migrate'], env);
    const token = mintToken(env);
    const receiver = track(await start(dir, [RECEIVER], { env: { PORT: '0' }, cores: '1', ready: /listening (\d+)/ }));
    const hook = `${receiver.url}/hook`;

    if (!SKIP.has('events-backlog')) await backlog();
    if (!SKIP.has('events-ab') || !SKIP.has('events-latency')) {
      const service = track(await startService(dir, env));
      // Steady state is what is measured: a few seconds of creates first, unrecorded, and as many
      // with the webhook, its deliveries let through: the delivery path runs warm in the first
      // measured round as in the others (cold, the first round with a webhook was 15 to 29 % slower
      // than the second in three of five runs).
      await wrk(service.url, postScript(dir, token, nextPrefix()), WARM_UP);
      if (!SKIP.has('events-ab')) {
        await resetReceiver(receiver);
        const id = addWebhook(env, 'bench', hook);
        const warm = await wrk(service.url, postScript(dir, token, nextPrefix()), WARM_UP);
        await waitForDeliveries(receiver, warm.requests, DRAIN_MS);
        removeWebhook(env, id);
        await webhookAb(service);
      }
      if (!SKIP.has('events-latency')) await latency(service);
      await service.stop();
    }
    if (!SKIP.has('events-feed')) await feed();
    if (!SKIP.has('events-pages')) {
      // 5. The feed as pages of JSON (bench/event-pages.ts, which also runs alone).
      const pages = await pagesScenario(engine, env);
      rows.push(...pages.rows);
      notes.push(...pages.notes);
    }

    /** 3. Deliveries/s from a backlog written by an import while no server ran. */
    async function backlog(): Promise<void> {
      await resetReceiver(receiver);
      const id = addWebhook(env, 'bulk', hook);
      const prefix = nextPrefix();
      let text = '';
      for (let i = 0; i < BACKLOG; i++)
        text += `{"id":${prefix}${String(i).padStart(9, '0')},"owner":"bulk","name":"backlog plant ${i}"}\n`;
      const file = join(dir, 'backlog.ndjson');
      writeFileSync(file, text);
      const imported = Date.now();
      cli(['import', file], env);
      note(
        `backlog: imported ${BACKLOG} plants (events and deliveries) in ${((Date.now() - imported) / 1000).toFixed(1)} s`,
      );
      await vacuum();
      const load = loadAverage();
      const service = track(await startService(dir, env));
      const got = await waitForDeliveries(receiver, BACKLOG, Math.max(120_000, BACKLOG * 10));
      await service.stop();
      removeWebhook(env, id);
      const seconds = (got.last - got.first) / 1000;
      const rate = (got.unique - 1) / seconds;
      const fromReady = got.unique / ((got.last - service.readyAt) / 1000);
      row(`deliveries/s to one webhook, ${int(BACKLOG)} pending at start (target ≥ 3,000/s)`, [
        `${int(rate)}/s`,
        '—',
        '—',
        '—',
        '—',
        '—',
        '—',
      ]);
      note(
        `backlog: ${got.unique} of ${BACKLOG} delivered (${got.count - got.unique} repeats) in ${seconds.toFixed(1)} s ` +
          `from the first arrival; ${int(fromReady)}/s counted from the server's ready line; load average before ${load}, after ${loadAverage()}`,
      );
    }

    /** 1. POST /plants with one webhook against none, alternating, same server. */
    async function webhookAb(service: Server): Promise<void> {
      const results: { none: WrkResult[]; hook: WrkResult[] } = { none: [], hook: [] };
      const loads: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        await vacuum();
        results.none.push(await wrk(service.url, postScript(dir, token, nextPrefix())));
        note(`POST without a webhook, round ${round + 1}: ${int(results.none.at(-1)!.rps)} req/s`);
        loads.push(loadAverage());
        await resetReceiver(receiver);
        await vacuum();
        const id = addWebhook(env, 'bench', hook);
        const result = await wrk(service.url, postScript(dir, token, nextPrefix()));
        const ended = Date.now();
        loads.push(loadAverage());
        results.hook.push(result);
        const atEnd = await stats(receiver);
        // The deliveries of the run are let through before the next run starts (wrk's count leaves
        // out the requests still out when it stopped; they may have committed too), for at most
        // DRAIN_MS: then the webhook is removed, and its pending deliveries with it.
        const got = await waitForDeliveries(receiver, result.requests, DRAIN_MS);
        await sleep(500);
        const settled = await stats(receiver);
        removeWebhook(env, id);
        const caughtUp =
          got.unique >= result.requests
            ? `caught up ${(Math.max(0, got.last - ended) / 1000).toFixed(1)} s later`
            : `still ${result.requests - got.unique} behind ${DRAIN_MS / 1000} s later (removed with the webhook)`;
        note(
          `POST with 1 webhook, round ${round + 1}: ${int(result.rps)} req/s, ${result.requests} created, ${atEnd.unique} delivered during the ` +
            `${DURATION} s run (${int(atEnd.unique / DURATION)}/s), ${result.requests - atEnd.unique} behind when wrk stopped, ` +
            `${caughtUp}; ${settled.unique} plants delivered, ${settled.count - settled.unique} repeats`,
        );
      }
      const [hooked, none] = [combine(results.hook), combine(results.none)];
      row('POST /plants, 1 webhook (bare columns: no webhook; target ratio ≥ 0.85)', [
        int(hooked.rps),
        fmt(hooked.p50),
        fmt(hooked.p99),
        int(none.rps),
        fmt(none.p50),
        fmt(none.p99),
        fmt(hooked.rps / none.rps),
      ]);
      note(`POST with and without a webhook: load average after each run ${loads.join('; ')}`);
    }

    /** 2. Commit-to-receiver latency at a steady rate. */
    async function latency(service: Server): Promise<void> {
      await resetReceiver(receiver);
      await vacuum();
      const id = addWebhook(env, 'bench', hook);
      // Steady state is what is measured: the same load first, unrecorded, so that the webhook's
      // first connections and the delivery path's first runs are behind it.
      await role<PaceResult>(
        dir,
        'pace',
        { port: service.port, token, rate: RATE, seconds: RATE_WARM_UP, prefix: nextPrefix() },
        RATE_WARM_UP * 1000 + 60_000,
      );
      await waitForDeliveries(receiver, RATE * RATE_WARM_UP, DRAIN_MS);
      await resetReceiver(receiver);
      const prefix = nextPrefix();
      const load = loadAverage();
      const paced = await role<PaceResult>(
        dir,
        'pace',
        { port: service.port, token, rate: RATE, seconds: RATE_SECONDS, prefix },
        RATE_SECONDS * 1000 + 60_000,
      );
      const ok = paced.results.filter((r) => r[3] === 200);
      if (ok.length !== paced.results.length)
        throw new Error(`${paced.results.length - ok.length} paced creates were not answered 200`);
      await waitForDeliveries(receiver, ok.length, DRAIN_MS);
      const arrivals = new Map(await receiverCall<Array<[string, number]>>(receiver, '/__arrivals'));
      removeWebhook(env, id);
      const created = await createdAt(env, `${prefix}000000000`, `${prefix}999999999`);
      const fromCommit: number[] = [];
      const fromAnswer: number[] = [];
      const postLatency: number[] = [];
      let missing = 0;
      for (const [plant, sent, answered] of ok) {
        postLatency.push(answered - sent);
        const at = arrivals.get(plant) ?? Infinity;
        const stamp = created.get(plant);
        if (stamp === undefined) throw new Error(`no plant.created event in the database for plant ${plant}`);
        if (at === Infinity) missing += 1;
        fromCommit.push(at - stamp);
        fromAnswer.push(at - answered);
      }
      const rate = ok.length / ((ok.at(-1)![1] - ok[0]![1]) / 1000);
      const at = `at ${int(RATE)} creates/s`;
      latencyRow(
        `event created_at → receiver, ${at} (target p50 ≤ 20, p99 ≤ 200 ms)`,
        `${int(rate)}/s sent`,
        fromCommit,
      );
      latencyRow(`POST's 200 at the client → receiver, ${at}`, `${int(rate)}/s sent`, fromAnswer);
      latencyRow(`POST /plants latency, ${at} (1 webhook)`, `${int(rate)}/s sent`, postLatency);
      note(
        `steady ${int(RATE)}/s for ${RATE_SECONDS} s: ${ok.length} creates, ${missing} not delivered within ${DRAIN_MS / 1000} s after; ` +
          `created_at → receiver max ${fmt(Math.max(...fromCommit))} ms; the generator fell behind its schedule by at most ` +
          `${fmt(paced.maxLagMs)} ms; load average before ${load}, after ${loadAverage()}`,
      );
    }

    /** 4. The change feed: memory of many open streams, and the fan-out of an event to all of them. */
    async function feed(): Promise<void> {
      await vacuum();
      const tokens = await mintTokens(env, Math.ceil(STREAMS / STREAMS_PER_TOKEN), 'feed', [
        'plants:read',
        'plants:admin',
      ]);
      const service = track(await startService(dir, env));
      // A few requests, as any server has answered before its streams open; then settle.
      await wrk(service.url, postScript(dir, token, nextPrefix()), 1);
      await sleep(2000);
      const before = rss(service.child.pid!);
      const load = loadAverage();
      const prefix = nextPrefix();
      let afterOpen = 0;
      const fed = await role<FeedResult>(
        dir,
        'feed',
        { port: service.port, tokens, streams: STREAMS, perToken: STREAMS_PER_TOKEN, events: FANOUT, token, prefix },
        180_000,
        async () => {
          await sleep(1000);
          afterOpen = rss(service.child.pid!);
        },
      );
      const afterFanout = rss(service.child.pid!);
      await service.stop();
      const fromSend: number[] = [];
      const fromAnswer: number[] = [];
      let missing = 0;
      for (const stream of fed.arrivals)
        for (const [k, at] of stream.entries()) {
          if (at < 0) missing += 1;
          fromSend.push(at < 0 ? Infinity : at - fed.sent[k]!);
          fromAnswer.push(at < 0 ? Infinity : at - fed.answered[k]!);
        }
      const perEvent = fed.sent.map((_, k) =>
        fmt(
          percentile(
            fromSend.filter((_, i) => i % FANOUT === k),
            99,
          ),
          1,
        ),
      );
      row(`change feed: server RSS growth with ${int(STREAMS)} streams open (target ≤ 50 MB)`, [
        `${fmt(afterOpen - before, 1)} MB`,
        '—',
        '—',
        '—',
        '—',
        '—',
        '—',
      ]);
      latencyRow(
        `change feed: POST sent → event on each of ${int(STREAMS)} streams, ${FANOUT} events 1 s apart (target p99 ≤ 100 ms)`,
        '—',
        fromSend,
      );
      note(
        `feed: RSS ${fmt(before, 1)} MB before, ${fmt(afterOpen, 1)} MB with ${STREAMS} streams open (${fed.opened} opened in ` +
          `${fmt(fed.openMs / 1000, 1)} s), ${fmt(afterFanout, 1)} MB after the fan-out; POST's 200 → event p50 ` +
          `${fmt(percentile(fromAnswer, 50))} p99 ${fmt(percentile(fromAnswer, 99))} ms; max ${fmt(Math.max(...fromSend))} ms; ` +
          `${missing} of ${STREAMS * FANOUT} not received; p99 of each event ${perEvent.join(', ')} ms; POST latency ${fed.answered.map((a, k) => fmt(a - fed.sent[k]!, 1)).join(', ')} ms; ` +
          `load average before ${load}, after ${loadAverage()}`,
      );
    }
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}

/**
 * On a PostgreSQL server with autovacuum off (as on the machines these numbers come from), what
 * autovacuum would do between two scenarios: without it the dead rows of the deliveries of one
 * scenario, and plans made without statistics, weigh on the next, as in no deployment. Answers
 * whether it ran.
 */
export async function vacuumIfNoAutovacuum(env: NodeJS.ProcessEnv): Promise<boolean> {
  const url = env.DATABASE_URL!;
  if (url.startsWith('sqlite:')) return false;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ autovacuum: string }>('SHOW autovacuum');
    if (rows[0]?.autovacuum !== 'off') return false;
    await client.query('VACUUM ANALYZE');
    return true;
  } finally {
    await client.end();
  }
}

/** The events' created_at (ms) of the plants with ids from..to, by plant id, read from the database. */
async function createdAt(env: NodeJS.ProcessEnv, from: string, to: string): Promise<Map<string, number>> {
  const url = env.DATABASE_URL!;
  const sql = "SELECT plant_id, created_at FROM events WHERE type = 'plant.created' AND plant_id BETWEEN";
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length).replace(/^\/\//, ''), { readonly: true, fileMustExist: true });
    try {
      const rows = db.prepare(`${sql} ? AND ?`).safeIntegers(true).all(BigInt(from), BigInt(to)) as Array<{
        plant_id: bigint;
        created_at: bigint;
      }>;
      return new Map(rows.map((r) => [String(r.plant_id), Number(r.created_at)]));
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ plant_id: string; created_at: string }>(
      `SELECT plant_id::text AS plant_id, created_at::text AS created_at FROM (${sql} $1 AND $2) AS e`,
      [from, to],
    );
    return new Map(rows.map((r) => [r.plant_id, Number(r.created_at)]));
  } finally {
    await client.end();
  }
}

async function main(): Promise<void> {
  exitOnSignal();
  const started = new Date();
  const results: EventResults[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-events-db-'));
  try {
    if (!SKIP.has('sqlite'))
      results.push(await eventScenarios('SQLite', { DATABASE_URL: `sqlite:${join(dir, 'events.db')}` }));
    if (!SKIP.has('postgres'))
      results.push(await onBenchPostgres((url) => eventScenarios('PostgreSQL', { DATABASE_URL: url })));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${started.toISOString()}`,
  );
  console.log(
    `service pinned to core 0; wrk -t1 -c50 -d${DURATION}s, the load generators and the webhook receiver pinned to core 1; ${ROUNDS} alternating rounds, medians\n`,
  );
  console.log(
    '| engine | scenario | service req/s | p50 ms | p99 ms | bare req/s | bare p50 | bare p99 | service/bare |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of results) for (const line of r.rows) console.log(line);
  console.log('');
  for (const r of results) for (const line of r.notes) console.log(`- ${line}`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === THIS) await main();
