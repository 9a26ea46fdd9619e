import pg from 'pg';
import { inTransaction } from './transaction.js';
import { HostRouter, routeThrough } from './hosts.js';
import { hostLabel, hostUrl, parsePostgresUrl } from '../../wire/postgres-url.js';
import { postgresMigrations } from './migrations.js';

// The PostgreSQL pools: how each connects, how long a query may wait, what an idle connection's
// failure does; and the schema they are brought to (postgres/migrations.ts).

// Serialises migrations of every instance that starts at once (an arbitrary, fixed lock key).
const MIGRATION_LOCK = 7_316_001;

/** How long a query may wait for a connection before the request fails (503, retryable). */
export const CONNECT_TIMEOUT_MS = 3000;

export interface PostgresOptions {
  /** Connections per process. */
  readonly poolSize?: number;
  /** Called when an idle connection fails (the server went away); the pool replaces it. */
  readonly onIdleError?: (error: Error) => void;
  /**
   * With a multi-host URL or target_session_attrs (interface 1.3.0): how long a new connection
   * waits for a server that is what the URL asks (DATABASE_FAILOVER_WAIT), and who hears that the
   * server in use changed.
   */
  readonly failoverWaitMs?: number;
  readonly onHostChange?: (now: string, was: string | undefined) => void;
}

/** Default of DATABASE_FAILOVER_WAIT. */
export const FAILOVER_WAIT_MS = 10_000;

/** The URL with a server setting added to its `options` parameter (kept with any already there). */
function withServerOption(url: string, option: string): string {
  const parsed = new URL(url);
  const given = parsed.searchParams.get('options');
  parsed.searchParams.set('options', given === null ? option : `${given} ${option}`);
  return parsed.toString();
}

/** Connections of the webhook dispatcher's pool, per process. */
export const DISPATCH_POOL_SIZE = 4;

/**
 * The router of a DATABASE_URL with more than one server or with target_session_attrs, shared by
 * every pool and connection of a store; undefined for one server, which node-postgres reads itself.
 */
export function routerFor(url: string, options: PostgresOptions = {}): HostRouter | undefined {
  const parsed = parsePostgresUrl(url);
  if (parsed.hosts.length === 1 && parsed.sessionAttrs === 'any') return undefined;
  const router = new HostRouter(parsed, parsed.connectTimeoutMs ?? CONNECT_TIMEOUT_MS, {
    onHostChange: (now, was) => options.onHostChange?.(hostLabel(now), was && hostLabel(was)),
  });
  router.waitMs = options.failoverWaitMs ?? FAILOVER_WAIT_MS;
  return router;
}

export function createPool(
  url: string,
  options: PostgresOptions & { readonly asyncCommit?: boolean } = {},
  router: HostRouter | undefined = routerFor(url, options),
): pg.Pool {
  const parsed = parsePostgresUrl(url);
  const connectTimeoutMs = parsed.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  // libpq's parameters that node-postgres does not know (target_session_attrs, …) are left out.
  const single = hostUrl(parsed, parsed.hosts[0]!);
  const connectionString =
    options.asyncCommit === true ? withServerOption(single, '-c synchronous_commit=off') : single;
  const pool = new pg.Pool({
    connectionString,
    max: options.poolSize ?? 10,
    // Fail fast when the server is unreachable, so callers get a 503 instead of a hang; with more
    // than one server, after waiting up to DATABASE_FAILOVER_WAIT for the one to write to.
    connectionTimeoutMillis: connectTimeoutMs + (router?.waitMs ?? 0),
    query_timeout: 15_000,
    idleTimeoutMillis: 30_000,
    ...(router && { Client: router.Client }),
  });
  if (router) routeThrough(pool, router);
  // Without a listener an idle connection's error (a server restart) would crash the process.
  pool.on('error', options.onIdleError ?? (() => {}));
  return pool;
}

/** A word for a shell: as it is when it needs no quoting, else in single quotes. */
const shellWord = (word: string): string =>
  /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;

/**
 * The `createdb` command that creates the database `url` names, on its server, as its user (never
 * with the password: createdb asks for it, or reads PGPASSWORD or ~/.pgpass).
 */
export function createdbCommand(url: string): string {
  const parsed = new URL(url);
  const host = parsed.searchParams.get('host') ?? parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  const user = decodeURIComponent(parsed.username);
  const database = decodeURIComponent(parsed.pathname.slice(1)) || user;
  const words = ['createdb'];
  if (host !== '') words.push('-h', host);
  words.push('-p', parsed.searchParams.get('port') ?? (parsed.port || '5432'));
  if (user !== '') words.push('-U', user);
  words.push(database);
  return words.map(shellWord).join(' ');
}

/**
 * A database that does not exist (SQLSTATE 3D000) said with what to do: the server's message alone
 * (`database "plants" does not exist`) left the operator to find out that the service creates the
 * tables but not the database.
 */
function explainMissingDatabase(error: unknown, url: string): unknown {
  if (!(error instanceof pg.DatabaseError) || error.code !== '3D000') return error;
  let command: string;
  try {
    command = createdbCommand(url);
  } catch {
    return error; // a URL that pg reads and URL does not: the server's message as it is
  }
  return new Error(`${error.message}: create it with ${command}, then run this again`, { cause: error });
}

/** Applies the pending migrations, one instance at a time; answers the versions it applied. */
export async function migrate(pool: pg.Pool): Promise<number[]> {
  try {
    return await migrateSteps(pool);
  } catch (error) {
    throw explainMissingDatabase(error, pool.options.connectionString ?? '');
  }
}

function migrateSteps(pool: pg.Pool): Promise<number[]> {
  return inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
    );
    const done = new Set(
      (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
    );
    const applied: number[] = [];
    for (const m of postgresMigrations) {
      if (done.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
      applied.push(m.version);
    }
    return applied;
  });
}
