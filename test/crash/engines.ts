import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { postgresUrl, stopSharedPostgres } from '../support/postgres.js';
import type { StoredPlant } from './ledger.js';

/** The database of one crash run, read directly (not through the service) after each kill. */
export interface CrashDatabase {
  readonly engine: 'sqlite' | 'postgres';
  /** DATABASE_URL for the server and the CLI. */
  readonly url: string;
  /** How the integrity is checked, said once before the rounds. */
  readonly integrityMethod: string;
  /** Waits until nothing the killed server started can still change the data. */
  quiesce(): Promise<void>;
  /** The integrity problems (none: []) and every stored plant. */
  inspect(): Promise<{ problems: string[]; plants: Map<bigint, StoredPlant> }>;
  /** Removes the database; `keep` leaves it for a post-mortem and answers where it is. */
  dispose(keep: boolean): Promise<string | undefined>;
  /**
   * Takes the write lock from another connection, as an operator's `sqlite3` session or an import
   * would (SQLite only), and answers the function that releases it.
   */
  holdWriteLock?(): () => void;
  /** Every event in the log, read directly: id, type and the payload exactly as stored. */
  events(): Promise<LoggedEvent[]>;
}

export interface LoggedEvent {
  readonly id: bigint;
  readonly type: string;
  readonly payload: string;
}

/** A file database in a temporary folder. */
export function sqliteDatabase(): CrashDatabase {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-crash-'));
  const file = join(dir, 'store.db');
  return {
    engine: 'sqlite',
    url: `sqlite:${file}`,
    integrityMethod: 'PRAGMA integrity_check',
    // SIGKILL has been waited for: the process, and so every write of it, is gone.
    quiesce: async () => {},
    inspect: async () => {
      // Read-only: a writable connection would checkpoint the WAL on close, recovering the crash
      // for the server instead of leaving that to the server's own start.
      const db = new Database(file, { readonly: true, fileMustExist: true });
      try {
        const result = (db.pragma('integrity_check') as { integrity_check: string }[]).map((r) => r.integrity_check);
        const problems = result.length === 1 && result[0] === 'ok' ? [] : result.map((r) => `integrity_check: ${r}`);
        const rows = db.prepare('SELECT id, owner, name, tag FROM plants').safeIntegers(true).all() as PlantRow[];
        return { problems, plants: byId(rows) };
      } finally {
        db.close();
      }
    },
    dispose: async (keep) => {
      if (keep) return dir;
      rmSync(dir, { recursive: true, force: true });
      return undefined;
    },
    events: async () => {
      const db = new Database(file, { readonly: true, fileMustExist: true });
      try {
        return db.prepare('SELECT id, type, payload FROM events ORDER BY id').safeIntegers(true).all() as LoggedEvent[];
      } finally {
        db.close();
      }
    },
    holdWriteLock: () => {
      const holder = new Database(file, { fileMustExist: true });
      holder.exec('BEGIN IMMEDIATE');
      return () => {
        if (holder.inTransaction) holder.exec('ROLLBACK');
        holder.close();
      };
    },
  };
}

interface PlantRow {
  id: bigint | string;
  owner: string;
  name: string;
  tag: string | null;
}

const byId = (rows: PlantRow[]): Map<bigint, StoredPlant> =>
  new Map(rows.map((r) => [BigInt(r.id), { owner: r.owner, name: r.name, tag: r.tag }]));

const APPLICATION = 'plant-store-crash';

/**
 * A fresh database of its own on the test server (TEST_DATABASE_URL, else a throwaway one), so
 * the run neither sees nor disturbs other tests' data, and is dropped at the end.
 */
export async function postgresDatabase(): Promise<CrashDatabase> {
  const base = await postgresUrl();
  const name = `plant_store_crash_${process.pid}`;
  await withClient(base, async (admin) => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${name}`);
  });
  const direct = new URL(base);
  direct.pathname = `/${name}`;
  // The server's connections carry a name of their own, so that quiesce() can wait for them.
  const served = new URL(direct);
  served.searchParams.set('application_name', APPLICATION);

  const amcheck = await withClient(direct.toString(), (client) =>
    client.query('CREATE EXTENSION IF NOT EXISTS amcheck').then(
      () => null,
      (error: unknown) => String(error),
    ),
  );
  return {
    engine: 'postgres',
    url: served.toString(),
    integrityMethod:
      amcheck === null
        ? 'amcheck: bt_index_parent_check(heapallindexed) on every index, verify_heapam on every table'
        : `amcheck is not available (${amcheck}); consistency queries instead: every index scan agrees with a sequential scan`,
    quiesce: async () => {
      const deadline = Date.now() + 15_000;
      for (;;) {
        const { rows } = await withClient(base, (client) =>
          client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [
            APPLICATION,
          ]),
        );
        if (rows[0]!.n === 0) return;
        if (Date.now() > deadline) throw new Error(`the killed server's ${rows[0]!.n} sessions did not end in 15 s`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    events: () =>
      withClient(direct.toString(), async (client) => {
        const { rows } = await client.query<{ id: string; type: string; payload: string }>(
          'SELECT id, type, payload FROM events ORDER BY id',
        );
        return rows.map((r) => ({ id: BigInt(r.id), type: r.type, payload: r.payload }));
      }),
    inspect: () =>
      withClient(direct.toString(), async (client) => {
        const problems = amcheck === null ? await amcheckProblems(client) : await scanProblems(client);
        const { rows } = await client.query<PlantRow>('SELECT id, owner, name, tag FROM plants');
        return { problems, plants: byId(rows) };
      }),
    dispose: async (keep) => {
      try {
        if (keep) return `${direct.toString()} (database ${name})`;
        await withClient(base, (admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
        return undefined;
      } finally {
        if (process.env.TEST_DATABASE_URL === undefined) await stopSharedPostgres();
      }
    },
  };
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** B-tree structure and heap-to-index agreement of every index, and the heap of every table. */
async function amcheckProblems(client: pg.Client): Promise<string[]> {
  const problems: string[] = [];
  const relations = await client.query<{ name: string; kind: string }>(
    `SELECT c.oid::regclass::text AS name, c.relkind::text AS kind FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_am a ON a.oid = c.relam
      WHERE n.nspname = current_schema() AND (c.relkind = 'r' OR (c.relkind = 'i' AND a.amname = 'btree'))`,
  );
  for (const { name, kind } of relations.rows) {
    try {
      if (kind === 'i') {
        // The parent check takes a ShareLock: fine, nothing else runs while the server is down.
        await client.query('SELECT bt_index_parent_check($1::regclass, true)', [name]);
      } else {
        const { rows } = await client.query<{ msg: string }>('SELECT msg FROM verify_heapam($1::regclass)', [name]);
        for (const { msg } of rows) problems.push(`verify_heapam(${name}): ${msg}`);
      }
    } catch (error) {
      problems.push(`amcheck on ${name}: ${String(error)}`);
    }
  }
  return problems;
}

/** Without amcheck: the rows reached through each index are the rows a sequential scan finds. */
async function scanProblems(client: pg.Client): Promise<string[]> {
  const summary = async (settings: string, where: string): Promise<string> => {
    await client.query('BEGIN');
    try {
      await client.query(settings);
      const { rows } = await client.query<{ s: string }>(
        `SELECT count(*) || ' rows, id sum ' || coalesce(sum(id), 0) AS s FROM plants WHERE ${where}`,
      );
      return rows[0]!.s;
    } finally {
      await client.query('ROLLBACK');
    }
  };
  const seq =
    'SET LOCAL enable_indexscan = off; SET LOCAL enable_indexonlyscan = off; SET LOCAL enable_bitmapscan = off';
  const index = 'SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off';
  const problems: string[] = [];
  for (const [what, where] of [
    ['every id', 'id >= -9223372036854775808'],
    ['every owner', "owner >= ''"],
    ['every tag', "tag IS NOT NULL AND tag >= ''"],
  ] as const) {
    const [bySeq, byIndex] = [await summary(seq, where), await summary(index, where)];
    if (bySeq !== byIndex)
      problems.push(`plants of ${what}: a sequential scan finds ${bySeq}, an index scan ${byIndex}`);
  }
  return problems;
}
