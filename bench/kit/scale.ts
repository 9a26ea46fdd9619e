// What the axes of bench/scale.ts share: a database of the run (a SQLite file under /var/tmp, or a
// PostgreSQL database of its own on the machine's server), raw SQL for seeding it fast, the store
// opened in this process, the service started on it, and small HTTP helpers.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { once } from 'node:events';
import { Agent, createServer, request } from 'node:http';
import { type AddressInfo, type Socket, createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { newWebhookSecret } from '../../src/webhooks/signing.js';
import { BIN, type Server, cli as run, mintToken, start } from './server.js';

export type Engine = 'sqlite' | 'postgres';
const PG_ADMIN = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** A database of one run: raw SQL for seeding, its size on disk, the store on it; dropped by `drop`. */
export interface RunDb {
  readonly engine: Engine;
  readonly url: string;
  readonly dir: string;
  /** Runs SQL (one or more statements) and answers the rows of the last one. */
  sql(text: string, params?: unknown[]): Promise<Array<Record<string, unknown>>>;
  /** `SELECT i FROM <series>`: 1..n, on either engine. */
  series(n: number): string;
  /** Bytes the database holds on disk (SQLite: the file and its WAL; PostgreSQL: the database). */
  bytes(): Promise<number>;
  openStore(): Promise<Store>;
  drop(): Promise<void>;
}

export async function createRunDb(engine: Engine): Promise<RunDb> {
  const dir = mkdtempSync('/var/tmp/plant-store-scale-');
  if (engine === 'sqlite') {
    const file = join(dir, 'scale.db');
    const url = `sqlite:${file}`;
    run(['migrate'], { DATABASE_URL: url });
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    const size = (f: string): number => {
      try {
        return statSync(f).size;
      } catch {
        return 0;
      }
    };
    return {
      engine,
      url,
      dir,
      sql: (text, params = []) => {
        const statements = text.split(/;\s*$/m).filter((s) => s.trim() !== '');
        let rows: Array<Record<string, unknown>> = [];
        db.transaction(() => {
          for (const s of statements) {
            const st = db.prepare(s);
            if (st.reader) rows = st.all(...params) as Array<Record<string, unknown>>;
            else st.run(...params);
          }
        })();
        return Promise.resolve(rows);
      },
      series: (n) => `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${n}) SELECT i FROM s`,
      bytes: () => {
        db.pragma('wal_checkpoint(TRUNCATE)'); // the pages themselves, not a WAL that happens to be long
        return Promise.resolve(size(file) + size(`${file}-wal`));
      },
      openStore: () => openStore({ engine: 'sqlite', path: file }),
      drop: () => {
        db.close();
        rmSync(dir, { recursive: true, force: true });
        return Promise.resolve();
      },
    };
  }
  const name = `plant_store_scale_${process.pid}`; // one per run: runs may overlap
  const admin = new pg.Client({ connectionString: PG_ADMIN });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  const url = PG_ADMIN.replace(/\/[^/]*$/, `/${name}`);
  run(['migrate'], { DATABASE_URL: url });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return {
    engine,
    url,
    dir,
    sql: async (text, params) => {
      const result = await client.query(text, params);
      const last = Array.isArray(result) ? (result.at(-1) as pg.QueryResult) : result;
      return last.rows as Array<Record<string, unknown>>;
    },
    series: (n) => `SELECT i FROM generate_series(1, ${n}) AS s(i)`,
    bytes: async () =>
      Number(((await client.query('SELECT pg_database_size(current_database()) AS b')).rows[0] as { b: string }).b),
    openStore: () => openStore({ engine: 'postgres', url }),
    drop: async () => {
      await client.end();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The service (this checkout's dist/) on the run's database, pinned to core 0. */
export const serve = (db: RunDb, env: NodeJS.ProcessEnv = {}): Promise<Server> =>
  start(
    db.dir,
    // BENCH_SCALE_PROFILE=<dir>: the service writes its CPU profile there when it stops
    [
      ...(process.env.BENCH_SCALE_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_SCALE_PROFILE}`] : []),
      // BENCH_SCALE_CHECKOUT=<dir>: the service of another built checkout (the A of an A/B)
      process.env.BENCH_SCALE_CHECKOUT ? join(process.env.BENCH_SCALE_CHECKOUT, 'bin/plant-store.js') : BIN,
      'serve',
    ],
    {
      env: {
        DATABASE_URL: db.url,
        PORT: '0',
        RATE_LIMIT: 'off',
        WEBHOOK_ALLOW_PRIVATE: '1',
        LOG_LEVEL: 'info',
        MAX_EVENT_LOOP_DELAY: 'off',
        ...env,
      },
      cores: '0',
      timeoutMs: 300_000,
    },
  );

/** `plant-store <args>` on the run's database; answers its stdout. */
export const cli = (db: RunDb, args: string[]): string => run(args, { DATABASE_URL: db.url });

export const mint = (db: RunDb, subject: string, scopes: string): string =>
  mintToken({ DATABASE_URL: db.url }, subject, scopes);

const agent = new Agent({ keepAlive: true, maxSockets: 16 });

export interface Answer {
  readonly status: number;
  readonly body: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly ms: number;
}

/** One request on a kept-alive connection; its time from sending to the last byte. */
export function call(
  url: string,
  method: string,
  path: string,
  token: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = request(
      `${url}${path}`,
      {
        method,
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers, ms: performance.now() - started }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Asserts the status: a run on a broken service must not print numbers. */
export async function expectStatus(answer: Promise<Answer>, status: number): Promise<Answer> {
  const a = await answer;
  if (a.status !== status) throw new Error(`expected ${status}, got ${a.status}: ${a.body.slice(0, 300)}`);
  return a;
}

/** Times `fn` `n` times in a row; answers the times in ms. */
export async function times(n: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await fn(i);
    out.push(performance.now() - started);
  }
  return out;
}

/** One measured number of an axis at one size. */
export interface Measure {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  /** Whether a flat row is the goal (per-operation costs, memory); false for totals that must grow. */
  readonly perOp: boolean;
}

/** A webhook receiver in this process: answers 204 at once, counts, and notes each plant id's first arrival. */
export interface Receiver {
  readonly url: string;
  count: number;
  readonly arrivals: Map<string, number>;
  close(): Promise<void>;
}

const PLANT_ID = /"id":"?(-?\d+)/;

export async function receiver(): Promise<Receiver> {
  const r = { count: 0, arrivals: new Map<string, number>() };
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      r.count += 1;
      const id = PLANT_ID.exec(body)?.[1];
      if (id !== undefined && !r.arrivals.has(id)) r.arrivals.set(id, Date.now());
      res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return Object.assign(r, {
    url: `http://127.0.0.1:${port}/hook`,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  });
}

/** A receiver that accepts every connection and never answers (the sender gives up after 10 s). */
export async function hangingReceiver(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createNetServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => sockets.delete(socket));
    socket.resume();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hang`,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
}

/** A webhook secret as the service stores it without SECRETS_KEY. */
export const storedSecret = (webhookId: string): string => new SecretBox(null).seal(newWebhookSecret(), webhookId);
