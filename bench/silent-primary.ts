// Failover with a silent primary, measured on the service as users run it.
//
//   node --import tsx bench/silent-primary.ts [--runs 3] [--only partition|freeze] [--logs <dir>]
//   npm run bench -- --silent-primary [the same options]        (builds this checkout first)
//
// Each run: a fresh primary and its synchronous standby of this machine's PostgreSQL 15
// (test/failover/replica-pair.ts), and `node bin/plant-store.js serve` from dist/ on the two-host
// URL `postgres://…@<first>,<standby>/postgres?target_session_attrs=read-write` with the default
// DATABASE_FAILOVER_WAIT (10 s) and SHUTDOWN_GRACE (10 s); RATE_LIMIT and MAX_EVENT_LOOP_DELAY are
// off, so that no 429 or overload 503 of a busy shared machine is mistaken for the failover's.
// A token comes from `plant-store token create` on the same URL. One SSE reader of GET /events is
// opened, then 4 writers POST /plants with unique ids (one request in flight each, one keep-alive
// connection each). 2 s later the primary goes silent:
//
//   partition  the URL names a TCP proxy in front of the primary first; the proxy stops forwarding,
//              without a reset or a close (its connections stay open and carry nothing).
//   freeze     the URL names the primary first; the primary and every process of it are SIGSTOPped.
//
// 3 s after the fault the standby is promoted (`pg_ctl promote`, then until it takes writes: "the
// promotion" below is that moment). The writers go on for 8 s more. Then, with the primary still
// silent: the events on the new primary (`SELECT id FROM events`) against what the stream received
// (waiting up to 30 s for the missing ones), and SIGTERM to the service: how long until it exits,
// and its exit code. --logs keeps each run's service log in that folder (otherwise a temporary
// folder, removed at the end). Before SIGTERM the writers close their idle connections, so that
// the time to exit is the service's own. Measured per run:
//
//  - the first 200 answered after the promotion was requested, in ms after the promotion and
//    after the fault;
//  - the answers other than 200, by status (no answer within 30 s, or a transport error, is 0);
//  - the slowest request;
//  - the stream's lag for the events committed after the promotion (their ids are on the new
//    timeline: at or above timeline_id_base()): from the create's 200 to the event's arrival;
//  - whether the stream received every event the new primary has;
//  - SIGTERM → exit, and the exit code.
//
// No pinning: the machine has 2 cores and everything shares them; the load average is printed
// beside each run. Every run is bounded in time, the whole harness too, and whatever this process
// started (the service, the PostgreSQL servers, the proxy) is stopped on the way out, also on an
// error or a signal.
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { type ClientRequest, type IncomingMessage, get } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { silentProxy, startReplicaPair } from '../test/failover/replica-pair.js';
import { exitOnSignal, exitAfter, liveDirs, livePairs, loadAverage, log, now, sleep } from './kit/process.js';
import { type Server, mintTokenAsync, startService } from './kit/server.js';
import { median, ms } from './kit/stats.js';

const THIS = fileURLToPath(import.meta.url);
const FAULTS = ['partition', 'freeze'] as const;
type Fault = (typeof FAULTS)[number];
const WRITERS = 4;
const BEFORE_FAULT_MS = 2000;
const PROMOTE_AFTER_MS = 3000;
const WRITING_AFTER_PROMOTION_MS = 8000;
/** A request with no answer by then counts as status 0. */
const REQUEST_TIMEOUT_MS = 30_000;
/** How long the stream may take to receive the events it lacks once the writers stopped. */
const STREAM_WAIT_MS = 30_000;
/** SIGTERM's answer: past this the service is SIGKILLed and the run says so. */
const EXIT_WAIT_MS = 30_000;
/** The whole harness's bound: past it everything is stopped and the process exits 2. */
const DEADLINE_MS = 20 * 60_000;

// ---------------------------------------------------------------------------------------------
// The service, the stream, the writers.

/**
 * `plant-store serve` from dist/, unpinned, its stdout and stderr in `logFile` (kept); DATABASE_FAILOVER_WAIT,
 * SHUTDOWN_GRACE and LOG_LEVEL at their defaults whatever this process's environment says.
 */
const startSilentService = (databaseUrl: string, logFile: string): Promise<Server> =>
  startService(
    dirname(logFile),
    {
      DATABASE_FAILOVER_WAIT: undefined,
      SHUTDOWN_GRACE: undefined,
      LOG_LEVEL: undefined,
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      RATE_LIMIT: 'off',
      MAX_EVENT_LOOP_DELAY: 'off',
    },
    { log: logFile, stderrToLog: true },
  );

interface Stream {
  /** Each event id and when it arrived (performance.now()). */
  readonly seen: Map<bigint, number>;
  /** Event ids received more than once. */
  readonly repeated: bigint[];
  endedAt(): number | undefined;
  close(): void;
}

/** GET /events as an EventSource reads it, opened once and never reopened: what one stream receives. */
async function follow(port: number, token: string): Promise<Stream> {
  const seen = new Map<bigint, number>();
  const repeated: bigint[] = [];
  let endedAt: number | undefined;
  const request: ClientRequest = get({
    host: '127.0.0.1',
    port,
    path: '/events',
    agent: false,
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  request.on('error', () => void (endedAt ??= now()));
  const [response] = (await once(request, 'response')) as [IncomingMessage];
  if (response.statusCode !== 200) throw new Error(`GET /events answered ${response.statusCode}`);
  let buffered = '';
  response.setEncoding('utf8');
  response.on('data', (chunk: string) => {
    const at = now();
    buffered += chunk;
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const id = /^id: (\d+)$/m.exec(frame)?.[1];
      if (id === undefined) continue;
      if (seen.has(BigInt(id))) repeated.push(BigInt(id));
      else seen.set(BigInt(id), at);
    }
  });
  response.on('end', () => void (endedAt ??= now()));
  response.on('error', () => void (endedAt ??= now()));
  return { seen, repeated, endedAt: () => endedAt, close: () => request.destroy() };
}

interface Answer {
  readonly id: number;
  /** 0: no answer (a transport error, or none within REQUEST_TIMEOUT_MS). */
  readonly status: number;
  readonly body: string;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/** WRITERS loops, one request in flight each, creating plants with ids from `firstId` up until stop(). */
function write(url: string, token: string, firstId: number) {
  const pool = new Pool(url, { connections: WRITERS, pipelining: 1, keepAliveTimeout: 60_000 });
  const answers: Answer[] = [];
  let stopping = false;
  let next = firstId;
  const loops = Array.from({ length: WRITERS }, async () => {
    while (!stopping) {
      const id = next++;
      const sentAt = now();
      let status: number;
      let body: string;
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
        status = 0;
        body = String(error);
      }
      answers.push({ id, status, body, sentAt, answeredAt: now() });
    }
  });
  return {
    answers,
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(loops);
    },
    /** Closes the idle connections, as a client that is done does. */
    close: () => pool.close(),
  };
}

// ---------------------------------------------------------------------------------------------
// One run.

interface RunResult {
  readonly fault: Fault;
  readonly run: number;
  readonly loadAtFault: string;
  readonly requests: number;
  readonly ok: number;
  readonly statuses: Record<string, number>;
  /** ms from the promotion (the standby takes writes) to the first 200 answered after it was requested. */
  readonly firstAfterPromotion: number;
  readonly promotedAfterFault: number;
  readonly promotionTook: number;
  readonly slowest: number;
  readonly slowestSentAfterFault: number;
  /** From each create's 200 to its event on the stream, for the events on the new timeline. */
  readonly lags: number[];
  readonly eventsAfter: number;
  readonly eventsOnNew: number;
  readonly eventsMissing: number;
  readonly eventsRepeated: number;
  readonly streamEndedBeforeSigterm: boolean;
  readonly acknowledgedLost: number;
  readonly exitMs: number;
  readonly exitCode: number | null;
  readonly exitSignal: string | null;
  readonly notes: string[];
}

/** A stream's lag: tenths of a ms, where the median is about 1 ms; never received is ∞. */
const lagMs = (n: number) => (n === Infinity ? '∞ (never received)' : `${n.toFixed(1)} ms`);

/**
 * The service's log lines at warn (40) or above, and the lines that are not JSON (what Node.js
 * itself writes to stderr), counted by message and reason, with the first one's time after `origin`.
 */
function warnings(logFile: string, origin: number): string[] {
  const counted = new Map<string, { n: number; first: number | undefined }>();
  const count = (key: string, at: number | undefined) => {
    const seen = counted.get(key);
    if (seen) seen.n += 1;
    else counted.set(key, { n: 1, first: at });
  };
  for (const line of readFileSync(logFile, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    let entry: { level?: number; msg?: string; time?: number; reason?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      count(`stderr: ${line.slice(0, 200)}`, undefined);
      continue;
    }
    if ((entry.level ?? 0) < 40) continue;
    const reason = entry.reason === undefined ? '' : ` (${entry.reason.slice(0, 120)})`;
    count(`level ${entry.level}: ${entry.msg}${reason}`, (entry.time ?? 0) - (performance.timeOrigin + origin));
  }
  return [...counted].map(
    ([key, { n, first }]) => `${n} × ${key}${first === undefined ? '' : `, the first ${ms(first)} after the fault`}`,
  );
}

async function oneRun(fault: Fault, run: number, dir: string): Promise<RunResult> {
  const notes: string[] = [];
  const pair = await startReplicaPair({ synchronous: true });
  livePairs.add(pair);
  const proxy = fault === 'partition' ? await silentProxy(pair.primary.port) : undefined;
  let service: Server | undefined;
  let stream: Stream | undefined;
  let writers: ReturnType<typeof write> | undefined;
  try {
    const first = proxy?.port ?? pair.primary.port;
    const databaseUrl = `postgres://postgres@127.0.0.1:${first},127.0.0.1:${pair.standby.port}/postgres?target_session_attrs=read-write`;
    service = await startSilentService(databaseUrl, join(dir, `${fault}-${run}.log`));
    // Asynchronous: with `partition`, the command's connection goes through this process's proxy.
    const token = await mintTokenAsync({ DATABASE_URL: databaseUrl }, 'bench', 'plants:read,plants:write', {
      timeoutMs: 60_000,
    });
    stream = await follow(service.port, token);
    writers = write(service.url, token, 1);
    await sleep(BEFORE_FAULT_MS);

    const loadAtFault = loadAverage();
    // The fault's instant is when it is in place: freeze() lists the server's processes (ps) before
    // it stops them, tens of ms in which the primary still commits.
    if (proxy) proxy.vanish();
    else await pair.freeze(pair.primary, true);
    const faultAt = now();
    log(`${fault} ${run}: the primary is silent (load average ${loadAtFault})`);
    await sleep(PROMOTE_AFTER_MS - (now() - faultAt));
    const promoteAt = now();
    await pair.promote(pair.standby);
    const promotedAt = now();
    log(`${fault} ${run}: the standby takes writes, ${ms(promotedAt - promoteAt)} after pg_ctl promote`);
    await sleep(WRITING_AFTER_PROMOTION_MS);
    await writers.stop();
    const answers = writers.answers;

    // What the new primary has, against what the stream received.
    const events = (
      await pair.sql(
        pair.standby,
        'SELECT id::text AS id, plant_id::text AS plant, id >= timeline_id_base() AS after FROM events',
      )
    ).rows as Array<{ id: string; plant: string; after: boolean }>;
    const waitUntil = now() + STREAM_WAIT_MS;
    while (events.some((e) => !stream!.seen.has(BigInt(e.id))) && now() < waitUntil) await sleep(100);
    const missing = events.filter((e) => !stream!.seen.has(BigInt(e.id)));
    const onNew = new Set(events.map((e) => e.id));
    const extra = [...stream.seen.keys()].filter((id) => !onNew.has(String(id)));
    if (missing.length > 0)
      notes.push(
        `${missing.length} events never reached the stream within ${STREAM_WAIT_MS / 1000} s, e.g. ids ${missing
          .slice(0, 5)
          .map((e) => e.id)
          .join(', ')}`,
      );
    if (extra.length > 0) notes.push(`${extra.length} events streamed are not on the new primary`);
    if (stream.repeated.length > 0) notes.push(`${stream.repeated.length} event ids streamed twice`);

    const created = new Map<number, Answer>();
    for (const a of answers) if (a.status === 200) created.set(a.id, a);
    const lags: number[] = [];
    let withoutAnswer = 0;
    let slowestEvent: { lag: number; answeredAt: number } | undefined;
    for (const e of events.filter((x) => x.after)) {
      const answer = created.get(Number(e.plant));
      const arrived = stream.seen.get(BigInt(e.id));
      if (answer === undefined) {
        withoutAnswer++;
        continue;
      }
      const lag = arrived === undefined ? Infinity : arrived - answer.answeredAt;
      lags.push(lag);
      if (slowestEvent === undefined || lag > slowestEvent.lag) slowestEvent = { lag, answeredAt: answer.answeredAt };
    }
    if (withoutAnswer > 0) notes.push(`${withoutAnswer} events after the promotion have no create answered 200`);
    // Where the stream's slowest event was: its create answered how long after the promotion, and
    // how many events after the promotion lagged more than 100 ms.
    if (slowestEvent !== undefined)
      notes.push(
        `the stream's slowest event (${lagMs(slowestEvent.lag)}) was of a create answered ${ms(slowestEvent.answeredAt - promotedAt)} after the promotion; ${lags.filter((l) => l > 100).length} events lagged more than 100 ms`,
      );
    const stored = new Set(
      ((await pair.sql(pair.standby, 'SELECT id::text AS id FROM plants')).rows as Array<{ id: string }>).map(
        (r) => r.id,
      ),
    );
    const acknowledgedLost = [...created.keys()].filter((id) => !stored.has(String(id))).length;

    const statuses: Record<string, number> = {};
    const refused = answers.filter((x) => x.status !== 200);
    for (const a of refused) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
    if (refused.length > 10) notes.push(`${refused.length} answers other than 200; the first 10:`);
    for (const a of refused.slice(0, 10)) {
      notes.push(
        `${a.status} for id ${a.id}: sent ${ms(a.sentAt - faultAt)} after the fault, answered ${ms(a.answeredAt - promotedAt)} after the promotion: ${a.body.slice(0, 200)}`,
      );
    }
    const okBetween = answers.filter((a) => a.status === 200 && a.answeredAt > faultAt && a.answeredAt < promoteAt);
    if (okBetween.length > 0)
      notes.push(
        `${okBetween.length} creates answered 200 between the fault and the promotion request, the last ${ms(Math.max(...okBetween.map((a) => a.answeredAt)) - faultAt)} after the fault`,
      );
    const firstOk = Math.min(
      ...answers.filter((a) => a.status === 200 && a.answeredAt >= promoteAt).map((a) => a.answeredAt),
    );
    const slowest = answers.reduce((s, a) => (a.answeredAt - a.sentAt > s.answeredAt - s.sentAt ? a : s));

    // SIGTERM with the primary still silent and the stream open. The writers' keep-alive
    // connections are closed first: left idle, the service would wait for their client to close
    // them (undici does at the announced keep-alive timeout, SHUTDOWN_GRACE / 2, less 2 s), and
    // that wait, not the service's own, would be measured.
    await writers.close();
    const streamEndedBeforeSigterm = stream.endedAt() !== undefined;
    const child = service.child;
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    const termAt = now();
    child.kill('SIGTERM');
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, EXIT_WAIT_MS);
    const [exitCode, exitSignal] = await exited;
    const exitMs = now() - termAt;
    clearTimeout(timer);
    if (killed) notes.push(`the service had not exited ${EXIT_WAIT_MS / 1000} s after SIGTERM: SIGKILLed`);
    const streamEnd = stream.endedAt();
    if (streamEnd !== undefined && !streamEndedBeforeSigterm)
      notes.push(`the stream ended ${ms(streamEnd - termAt)} after SIGTERM`);
    notes.push(...warnings(service.log, faultAt));

    return {
      fault,
      run,
      loadAtFault,
      requests: answers.length,
      ok: created.size,
      statuses,
      firstAfterPromotion: firstOk - promotedAt,
      promotedAfterFault: promotedAt - faultAt,
      promotionTook: promotedAt - promoteAt,
      slowest: slowest.answeredAt - slowest.sentAt,
      slowestSentAfterFault: slowest.sentAt - faultAt,
      lags,
      eventsAfter: events.filter((e) => e.after).length,
      eventsOnNew: events.length,
      eventsMissing: missing.length,
      eventsRepeated: stream.repeated.length,
      streamEndedBeforeSigterm,
      acknowledgedLost,
      exitMs,
      exitCode,
      exitSignal,
      notes,
    };
  } finally {
    stream?.close();
    await writers?.stop();
    await writers?.close().catch(() => {});
    if (service && service.child.exitCode === null && service.child.signalCode === null) {
      const exited = once(service.child, 'exit');
      service.child.kill('SIGKILL');
      await exited;
    }
    proxy?.close();
    await pair.close();
    livePairs.delete(pair);
  }
}

// ---------------------------------------------------------------------------------------------

function row(r: RunResult): string {
  const non200 = Object.keys(r.statuses).length === 0 ? '0' : JSON.stringify(r.statuses);
  const lag = `${lagMs(median(r.lags))} / ${lagMs(Math.max(...r.lags))} (${r.lags.length.toLocaleString('en-US')})`;
  const stream = `${r.eventsMissing === 0 ? 'yes' : `no: ${r.eventsMissing} missing`}, ${r.eventsOnNew.toLocaleString('en-US')}${r.streamEndedBeforeSigterm ? ', ended early' : ''}`;
  const exit = `${ms(r.exitMs)}, ${r.exitSignal ?? String(r.exitCode)}`;
  return `| ${r.fault} ${r.run} | ${r.loadAtFault} | ${r.ok.toLocaleString('en-US')} | ${non200} | ${ms(r.firstAfterPromotion)} (${ms(r.firstAfterPromotion + r.promotedAfterFault)}) | ${ms(r.slowest)} | ${lag} | ${stream} | ${exit} |`;
}

function medianRow(fault: Fault, rs: RunResult[]): string {
  const all = rs.flatMap((r) => r.lags);
  return `| ${fault}: median | | ${median(rs.map((r) => r.ok)).toLocaleString('en-US')} | ${median(rs.map((r) => r.requests - r.ok))} | ${ms(median(rs.map((r) => r.firstAfterPromotion)))} (${ms(median(rs.map((r) => r.firstAfterPromotion + r.promotedAfterFault)))}) | ${ms(median(rs.map((r) => r.slowest)))} | ${lagMs(median(rs.map((r) => median(r.lags))))} / ${lagMs(median(rs.map((r) => Math.max(...r.lags))))} (${all.length.toLocaleString('en-US')} in all) | ${rs.filter((r) => r.eventsMissing === 0).length} of ${rs.length} | ${ms(median(rs.map((r) => r.exitMs)))} |`;
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      runs: { type: 'string', default: '3' },
      only: { type: 'string' },
      logs: { type: 'string' },
      'silent-primary': { type: 'boolean' }, // `npm run bench -- --silent-primary` passes it through
    },
  });
  const runs = Number(values.runs);
  const faults = FAULTS.filter((f) => values.only === undefined || values.only === f);
  if (faults.length === 0) throw new Error(`--only ${values.only}: one of ${FAULTS.join(', ')}`);
  exitAfter(DEADLINE_MS);
  let dir = values.logs;
  if (dir === undefined) {
    dir = mkdtempSync(join(tmpdir(), 'plant-store-silent-primary-'));
    liveDirs.add(dir);
  } else mkdirSync(dir, { recursive: true });
  const started = new Date();
  const loadBefore = loadAverage();
  const results: RunResult[] = [];
  for (let run = 1; run <= runs; run++)
    for (const fault of faults) {
      const result = await oneRun(fault, run, dir);
      results.push(result);
      log(row(result));
      for (const note of result.notes) log(`  ${note}`);
    }
  const loadAfter = loadAverage();
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model.trim()}, node ${process.version}, from ${started.toISOString()} to ${new Date().toISOString()}; load average (1, 5, 15 min) before ${loadBefore}, after ${loadAfter}\n`,
  );
  console.log(
    '| run | load average at the fault | creates answered 200 | other answers (status: count) | first 200 after the promotion (after the fault) | slowest request | stream lag after the promotion: median / max (events) | stream received every event on the new primary (events) | SIGTERM → exit, code |',
  );
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const r of results) console.log(row(r));
  for (const fault of faults)
    console.log(
      medianRow(
        fault,
        results.filter((r) => r.fault === fault),
      ),
    );
  console.log('');
  for (const r of results) {
    console.log(
      `- ${r.fault} ${r.run}: ${r.requests.toLocaleString('en-US')} requests; promoted ${ms(r.promotedAfterFault)} after the fault (pg_ctl promote took ${ms(r.promotionTook)}); slowest sent ${ms(r.slowestSentAfterFault)} after the fault; acknowledged creates missing on the new primary: ${r.acknowledgedLost}; ${r.eventsAfter} of ${r.eventsOnNew} events on the new timeline`,
    );
    for (const note of r.notes) console.log(`  - ${note}`);
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
