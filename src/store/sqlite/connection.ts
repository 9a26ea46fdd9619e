import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { makeFolder } from './folder.js';
import { sqliteMigrations } from './migrations.js';

// The SQLite connection: opened with the durability a 200 promises (docs/api.md) and the way its statements
// wait for locks, and brought up to the schema (sqlite/migrations.ts).

export interface SqliteOptions {
  /**
   * How a statement waits for another connection's lock. 'block' (the CLI's commands): SQLite's
   * busy_timeout, up to 5 s, blocking the thread. 'event-loop' (the server): no statement ever
   * waits inside SQLite, since better-sqlite3 is synchronous and a wait there would freeze every
   * request; writes retry from the event loop instead (GroupCommit), and a read that meets a lock
   * fails as unavailable (503). Migrations wait either way: they run before the server listens.
   */
  readonly locks?: 'block' | 'event-loop';
  /** How long a server's write may wait for the write lock (GroupCommit); 3 s, as a create on PostgreSQL. */
  readonly lockWaitMs?: number;
  /**
   * Tracing's seams, when it is on (docs/tracing.md): handed in by whoever opens the store (the
   * server), so that storage never reaches for the process's tracing itself.
   */
  readonly tracing?: SqliteTracing | undefined;
}

/** What tracing attaches to a SQLite store: tracing-hooks.ts's TracingHooks gives both. */
export interface SqliteTracing {
  /** Gives every statement of this connection a span (PostgreSQL's come from instrumentation-pg). */
  instrumentSqlite(db: Database.Database): void;
  /** Runs background work (the poll of data_version) outside the trace of the request that started it. */
  detached<T>(work: () => T): T;
}

const BUSY_TIMEOUT_MS = 5000;

/**
 * A SQLite database that cannot be created or opened where DATABASE_URL says: its message names the
 * file and the reason, on one line, and says what to change.
 */
export class DatabaseOpenError extends Error {
  override name = 'DatabaseOpenError';
  readonly code: string | undefined;
  constructor(path: string, reason: string, cause: unknown) {
    super(
      `cannot open the SQLite database ${path}: ${reason}; DATABASE_URL must name a file that this process can write, in a folder it can create and write`,
      { cause },
    );
    this.code = (cause as { code?: string }).code;
  }
}

const isBusyCode = (error: unknown): boolean => /^SQLITE_BUSY/.test((error as { code?: string }).code ?? '');

/** The file, its folder made first when missing; a failure of either is a DatabaseOpenError. */
function openFile(path: string): Database.Database {
  try {
    makeFolder(dirname(path));
    return new Database(path);
  } catch (error) {
    throw new DatabaseOpenError(path, (error as Error).message, error);
  }
}

/** Opens (creating when missing) a SQLite file with the durability a 200 promises. */
export function openConnection(
  path: string,
  { locks = 'block', tracing }: Pick<SqliteOptions, 'locks' | 'tracing'>,
): Database.Database {
  const db = path === ':memory:' ? new Database(path) : openFile(path);
  tracing?.instrumentSqlite(db); // a span per statement when tracing is on (docs/tracing.md)
  db.pragma(`busy_timeout = ${locks === 'event-loop' ? 0 : BUSY_TIMEOUT_MS}`);
  if (path !== ':memory:') {
    try {
      db.pragma('journal_mode = WAL');
    } catch (error) {
      db.close();
      // A file this process may read but not write (SQLITE_READONLY), a folder it cannot write the -wal file in.
      throw isBusyCode(error) ? error : new DatabaseOpenError(path, (error as Error).message, error);
    }
    if (db.pragma('journal_mode', { simple: true }) !== 'wal') throw new Error(`could not put ${path} in WAL mode`);
  }
  // FULL: in WAL mode every commit is fsynced before it returns, so a 200 survives power loss.
  db.pragma('synchronous = FULL');
  if (db.pragma('synchronous', { simple: true }) !== 2) throw new Error('could not set synchronous=FULL');
  return db;
}

/**
 * Applies the pending migrations; answers the versions it applied. `nonBlocking`: the server's
 * connection (busy_timeout 0), which waits for another process's lock here only.
 */
export function migrate(db: Database.Database, nonBlocking: boolean): number[] {
  db.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
  );
  const applied: number[] = [];
  // IMMEDIATE takes the write lock first, so two processes migrating at once apply each step once.
  const step = db.transaction((m: (typeof sqliteMigrations)[number]) => {
    if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version)) return;
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    applied.push(m.version);
  });
  // Migrations run before the server listens, so they may wait for another process's lock.
  if (nonBlocking) db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  try {
    for (const m of sqliteMigrations) step.immediate(m);
  } finally {
    if (nonBlocking) db.pragma('busy_timeout = 0');
  }
  return applied;
}
