// Webhook fairness: a healthy receiver's deliveries while another subject's webhooks hang.
//
//   node --import tsx bench/fairness.ts [--engine sqlite|postgres] [--checkout <dir>] [--hanging <n>]
//   npm run bench -- --fairness [the same options]        (builds this checkout first)
//
// --checkout: the root of a built checkout whose server to run (default: this one), e.g. a worktree
// of an older commit for "before": `git worktree add /tmp/before <commit>`, its node_modules as hard
// links (`cp -al node_modules /tmp/before/`), `npm run build` there.
// --engine: sqlite (a temporary file; the default) or postgres (a fresh database on
// BENCH_PG_ADMIN_URL, default postgres://postgres@127.0.0.1:5432/postgres, created for the run and
// dropped after it).
// --hanging: subject M's webhooks (default 20, the most a subject may have; 0: the baseline, A alone).
// --build-up, --latency-seconds, --burst: seconds of M's backlog before measuring (default 20), of
// the latency part (default 30), plants of the rate part (default 500).
//
// The server (`bin/plant-store.js serve` of the checkout, WEBHOOK_ALLOW_PRIVATE=1, RATE_LIMIT=off)
// runs pinned to core 0; this process holds the two receivers and the clients. Tokens come from
// the checkout's `plant-store token create`, webhooks from POST /webhooks.
//
//  - Subject M: `--hanging` webhooks at a receiver that accepts every connection and never answers
//    (one port per webhook, so each webhook has its own origin and its own connection pool; the
//    sender gives up after 10 s), and 4 plants a second created by M from the start to the end.
//  - Subject A: one webhook at a receiver answering 204 at once. Its id is made to sort after every
//    one of M's (A's webhook is re-created until it does): a claim that walks the webhooks by id
//    from the first reaches A's last. With random ids, A sorts after 8 or more of 20 about 13 times
//    in 21. On PostgreSQL, c0e8772's claim has no ORDER BY over the webhooks at all; A's webhook is
//    also the last row written, and the run prints where a plain scan of the table puts it.
//  - After `--build-up` seconds: (a) latency: A creates a plant every 250 ms for `--latency-seconds`;
//    per plant, from its POST's 200 to the healthy receiver getting the delivery (matched by the
//    plant id in the body); p50, p99, max, how many arrived; one not there 60 s after its 200 is
//    lost, and counts in the percentiles as lost. (b) rate: A creates `--burst` plants from 8
//    parallel clients; deliveries/s from the first arrival to the last, and the time from the first
//    POST until all have arrived (at most 120 s).
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { type Server as NetServer, type Socket, createServer as createNetServer } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import pg from 'pg';
import { exitOnSignal, loadAverage, sleep } from './kit/process.js';
import { type Server, cli, mintToken, startService } from './kit/server.js';
import { int, percentile } from './kit/stats.js';

const THIS = fileURLToPath(import.meta.url);
const HERE = fileURLToPath(new URL('..', import.meta.url));
const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';
const M_EVERY_MS = 250; // M: 4 plants a second
const A_EVERY_MS = 250; // A, latency part: 4 plants a second
const LOST_MS = 60_000;
const BURST_CAP_MS = 120_000;
const BURST_CLIENTS = 8;
/** Every request of the harness gives up after this long. */
const REQUEST_MS = 30_000;

export interface FairnessResult {
  readonly engine: string;
  readonly commit: string;
  readonly hanging: number;
  /** ms from each plant's 200 to its arrival; Infinity where lost. */
  readonly latencies: number[];
  readonly arrived: number;
  readonly sent: number;
  /** Deliveries/s of the burst from its first arrival to its last; time from the first POST until all arrived (ms, or undefined). */
  readonly rate: number;
  readonly burstArrived: number;
  readonly burstSent: number;
  readonly burstAllMs: number | undefined;
  readonly notes: string[];
}

const ms = (n: number): string =>
  n === Infinity ? 'lost (> 60 s)' : n >= 10_000 ? `${(n / 1000).toFixed(1)} s` : `${n.toFixed(1)} ms`;

/** One markdown row: engine, variant, p50, p99, max, arrived, rate, time for the burst. */
export function row(r: FairnessResult, variant: string): string {
  const cells = [
    r.engine,
    variant,
    ms(percentile(r.latencies, 50)),
    ms(percentile(r.latencies, 99)),
    ms(Math.max(...r.latencies)),
    `${r.arrived} / ${r.sent}`,
    Number.isFinite(r.rate) ? `${int(r.rate)}/s` : `— (${r.burstArrived} arrived)`,
    r.burstAllMs === undefined
      ? `not all in ${BURST_CAP_MS / 1000} s (${r.burstArrived} / ${r.burstSent})`
      : `${(r.burstAllMs / 1000).toFixed(2)} s`,
  ];
  return `| ${cells.join(' | ')} |`;
}

/** The receiver that answers every delivery 204 at once, noting when each plant's first arrived. */
async function healthyReceiver() {
  const arrivals = new Map<string, number>();
  let requests = 0;
  const server = createHttpServer((request, response) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      const now = performance.now();
      requests++;
      const id = /"id":(\d+)/.exec(body)?.[1];
      if (id !== undefined && !arrivals.has(id)) arrivals.set(id, now);
      response.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/a`,
    arrivals,
    requests: () => requests,
    stop: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** `ports` listeners that accept every connection and never answer; the sockets are held until stop. */
async function hangingReceiver(ports: number) {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let most = 0;
  const servers: NetServer[] = [];
  for (let i = 0; i < ports; i++) {
    const server = createNetServer((socket) => {
      accepted++;
      sockets.add(socket);
      most = Math.max(most, sockets.size);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
      socket.resume(); // read and drop the request
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    servers.push(server);
  }
  return {
    urls: servers.map((s) => `http://127.0.0.1:${(s.address() as { port: number }).port}/hangs`),
    accepted: () => accepted,
    open: () => sockets.size,
    most: () => most,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await Promise.all(
        servers.map(async (s) => {
          s.close();
          await once(s, 'close');
        }),
      );
    },
  };
}

/** A fresh PostgreSQL database for the run; dropped by the answer's drop(). */
async function freshPostgres(): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `plant_store_fairness_${process.pid}_${Date.now()}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** The active webhooks' ids in the order the database returns them with no ORDER BY. */
async function scanOrder(databaseUrl: string): Promise<string[]> {
  if (databaseUrl.startsWith('sqlite:')) {
    const db = new Database(databaseUrl.slice('sqlite:'.length), { readonly: true, fileMustExist: true });
    try {
      return db.prepare("SELECT id FROM webhooks WHERE status = 'active'").pluck().all() as string[];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<{ id: string }>("SELECT id FROM webhooks WHERE status = 'active'")).rows.map(
      (r) => r.id,
    );
  } finally {
    await client.end();
  }
}

export interface FairnessOptions {
  readonly engine: 'sqlite' | 'postgres';
  readonly checkout: string;
  readonly hanging: number;
  readonly buildUpSeconds: number;
  readonly latencySeconds: number;
  readonly burst: number;
}

export async function fairness(o: FairnessOptions): Promise<FairnessResult> {
  const bin = join(o.checkout, 'bin', 'plant-store.js');
  const commit =
    spawnSync('git', ['-C', o.checkout, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).stdout.trim() || '?';
  const engine = o.engine === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  const notes: string[] = [];
  const note = (text: string): void => {
    notes.push(text);
    console.error(`  ${engine} ${commit} (${o.hanging} hanging): ${text}`);
  };
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-fairness-'));
  const database = o.engine === 'postgres' ? await freshPostgres() : undefined;
  const env = { DATABASE_URL: database?.url ?? `sqlite:${join(dir, 'fairness.db')}` };
  const stops: Array<() => Promise<void>> = [];
  let mLoad: NodeJS.Timeout | undefined;
  try {
    cli(['migrate'], env, { bin, timeoutMs: 60_000 });
    const token = (subject: string): string => mintToken(env, subject, SCOPES, { bin, timeoutMs: 60_000 });
    const [mToken, aToken] = [token('mallory'), token('alice')];
    const healthy = await healthyReceiver();
    stops.push(healthy.stop);
    const hanging = await hangingReceiver(o.hanging);
    stops.push(hanging.stop);
    const server: Server = await startService(
      dir,
      { ...env, RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1' },
      { bin, cores: '0' },
    );
    stops.unshift(() => server.stop());

    const call = async (t: string, method: string, path: string, body?: unknown): Promise<Response> =>
      fetch(`${server.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${t}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_MS),
      });
    const addWebhook = async (t: string, url: string): Promise<string> => {
      const res = await call(t, 'POST', '/webhooks', { url });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`POST /webhooks: ${res.status} ${text}`);
      return (JSON.parse(text) as { id: string }).id;
    };
    const createPlant = async (t: string, id: number): Promise<number> => {
      const res = await call(t, 'POST', '/plants', { id, name: `plant ${id}` });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`POST /plants ${id}: ${res.status}`);
      return performance.now();
    };

    const mHooks: string[] = [];
    for (const url of hanging.urls) mHooks.push(await addWebhook(mToken, url));
    let aHook = await addWebhook(aToken, healthy.url);
    let tries = 1;
    // Byte order, as SQLite's ORDER BY id compares them: A's after every one of M's.
    while (mHooks.some((id) => id > aHook)) {
      if (tries >= 1000) throw new Error(`A's webhook did not sort after M's in ${tries} tries`);
      const res = await call(aToken, 'DELETE', `/webhooks/${aHook}`);
      await res.arrayBuffer();
      if (res.status !== 204) throw new Error(`DELETE /webhooks/${aHook}: ${res.status}`);
      aHook = await addWebhook(aToken, healthy.url);
      tries++;
    }
    const scan = await scanOrder(env.DATABASE_URL);
    note(
      `A's webhook ${aHook} sorts after M's ${o.hanging} (made in ${tries} tries); a plain scan of the webhooks ` +
        `puts it ${scan.indexOf(aHook) + 1} of ${scan.length}`,
    );

    // M: 4 plants a second from now until the end.
    let mNext = 5_000_000;
    let mCreated = 0;
    let mFailed = 0;
    mLoad = setInterval(() => {
      createPlant(mToken, mNext++).then(
        () => mCreated++,
        () => mFailed++,
      );
    }, M_EVERY_MS);
    const loadBefore = loadAverage();
    await sleep(o.buildUpSeconds * 1000);
    note(
      `after ${o.buildUpSeconds} s of build-up: M created ${mCreated} plants (${mFailed} failed); the hanging ` +
        `receiver accepted ${hanging.accepted()} connections, ${hanging.open()} open now (most at once ${hanging.most()}); ` +
        `a plain scan of the webhooks puts A's ${(await scanOrder(env.DATABASE_URL)).indexOf(aHook) + 1} of ${scan.length} now`,
    );

    // (a) latency: one plant of A's every 250 ms.
    let aNext = 1_000_000;
    const sent = new Map<string, number>(); // plant id → when its 200 came
    const pending: Array<Promise<void>> = [];
    const latencyEnd = performance.now() + o.latencySeconds * 1000;
    let aFailed = 0;
    while (performance.now() < latencyEnd) {
      const id = aNext++;
      pending.push(
        createPlant(aToken, id).then(
          (at) => void sent.set(String(id), at),
          () => void aFailed++,
        ),
      );
      await sleep(A_EVERY_MS);
    }
    await Promise.all(pending);
    const lastSent = Math.max(...sent.values());
    while (performance.now() < lastSent + LOST_MS && [...sent.keys()].some((id) => !healthy.arrivals.has(id)))
      await sleep(50);
    const latencies = [...sent].map(([id, at]) => {
      const got = healthy.arrivals.get(id);
      return got === undefined || got - at > LOST_MS ? Infinity : got - at;
    });
    const arrived = latencies.filter((l) => l !== Infinity).length;
    note(
      `latency: ${sent.size} plants of A's (${aFailed} failed POSTs), ${arrived} delivered within 60 s; ` +
        `the hanging receiver has ${hanging.open()} connections open (most at once ${hanging.most()})`,
    );

    // (b) rate: a burst of plants from a few parallel clients.
    const burstIds: string[] = [];
    let burstFailed = 0;
    const burstStart = performance.now();
    let next = 0;
    const burstFirst = 2_000_000;
    await Promise.all(
      Array.from({ length: BURST_CLIENTS }, async () => {
        while (next < o.burst) {
          const id = burstFirst + next++;
          try {
            await createPlant(aToken, id);
            burstIds.push(String(id));
          } catch {
            burstFailed++;
          }
        }
      }),
    );
    const posted = performance.now() - burstStart;
    while (performance.now() < burstStart + BURST_CAP_MS && burstIds.some((id) => !healthy.arrivals.has(id)))
      await sleep(25);
    const times = burstIds.map((id) => healthy.arrivals.get(id)).filter((t): t is number => t !== undefined);
    const first = Math.min(...times);
    const last = Math.max(...times);
    const rate = times.length > 1 ? (times.length - 1) / ((last - first) / 1000) : Number.NaN;
    const all = times.length === o.burst ? last - burstStart : undefined;
    note(
      `burst: ${burstIds.length} plants created in ${(posted / 1000).toFixed(2)} s (${burstFailed} failed), ` +
        `${times.length} delivered` +
        (times.length === 0
          ? ` in ${BURST_CAP_MS / 1000} s`
          : `, the first ${((first - burstStart) / 1000).toFixed(2)} s after the first POST, the last ${((last - burstStart) / 1000).toFixed(2)} s`),
    );
    clearInterval(mLoad);
    mLoad = undefined;
    note(
      `M created ${mCreated} plants in all (${mFailed} failed); the hanging receiver accepted ${hanging.accepted()} ` +
        `connections (most open at once ${hanging.most()}); load average before ${loadBefore}, after ${loadAverage()}`,
    );
    return {
      engine,
      commit,
      hanging: o.hanging,
      latencies,
      arrived,
      sent: sent.size + aFailed,
      rate,
      burstArrived: times.length,
      burstSent: o.burst,
      burstAllMs: all,
      notes,
    };
  } finally {
    if (mLoad) clearInterval(mLoad);
    for (const stop of stops) await stop().catch((error: unknown) => console.error(error));
    await database?.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      engine: { type: 'string', default: 'sqlite' },
      checkout: { type: 'string', default: HERE },
      hanging: { type: 'string', default: '20' },
      'build-up': { type: 'string', default: '20' },
      'latency-seconds': { type: 'string', default: '30' },
      burst: { type: 'string', default: '500' },
      fairness: { type: 'boolean' }, // `npm run bench -- --fairness` passes it through
    },
  });
  if (values.engine !== 'sqlite' && values.engine !== 'postgres')
    throw new Error(`--engine sqlite|postgres; got ${values.engine}`);
  const started = new Date();
  const result = await fairness({
    engine: values.engine,
    checkout: resolve(values.checkout),
    hanging: Number(values.hanging),
    buildUpSeconds: Number(values['build-up']),
    latencySeconds: Number(values['latency-seconds']),
    burst: Number(values.burst),
  });
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${started.toISOString()}`,
  );
  console.log('\n| engine | variant | p50 | p99 | max | arrived | deliveries/s | all of the burst |');
  console.log('|---|---|---|---|---|---|---|---|');
  console.log(row(result, `${result.commit}, ${result.hanging} hanging`));
  console.log('');
  for (const line of result.notes) console.log(`- ${line}`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === THIS) {
  exitOnSignal();
  await main(process.argv.slice(2));
}
