import pg from 'pg';
import { inTransaction } from './transaction.js';
import { HostRouter, routeThrough } from './hosts.js';
import { hostLabel, hostUrl, parsePostgresUrl } from '../../wire/postgres-url.js';
import { shellWord } from '../../wire/shell.js';
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
  /** The server in use was left: it stopped answering, went away, or another took writes on a newer timeline. */
  readonly onHostLeft?: (host: string, why: string) => void;
  /** A writable server is refused (an older timeline, another database system), or no longer (why undefined). */
  readonly onHostRefused?: (host: string, why: string | undefined) => void;
}

/** Default of DATABASE_FAILOVER_WAIT. */
export const FAILOVER_WAIT_MS = 10_000;

/**
 * The URL with a server setting added to its `options` parameter, kept with any already there:
 * `first` puts it before them, so that a setting the URL gives for the same name wins.
 */
function withServerOption(url: string, option: string, first = false): string {
  const parsed = new URL(url);
  const given = parsed.searchParams.get('options');
  parsed.searchParams.set('options', given === null ? option : first ? `${option} ${given}` : `${given} ${option}`);
  return parsed.toString();
}

/**
 * Every statement here is short and runs thousands of times; PostgreSQL's JIT compiles one whose
 * estimated cost passes jit_above_cost, which the delivery claim's does once a million deliveries
 * are pending, and the compiling (about 36 ms) then costs ten times the statement. Off for the
 * service's connections; a DATABASE_URL that sets `-c jit=on` in its options still wins.
 */
const NO_JIT = '-c jit=off';

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
    onHostLeft: (host, why) => options.onHostLeft?.(hostLabel(host), why),
    onHostRefused: (host, why) => options.onHostRefused?.(hostLabel(host), why),
  });
  router.waitMs = options.failoverWaitMs ?? FAILOVER_WAIT_MS;
  return router;
}

/** Each pool's DATABASE_URL as given, every server of it: what a missing database's createdb names. */
const givenUrls = new WeakMap<pg.Pool, string>();

export function createPool(
  url: string,
  options: PostgresOptions & { readonly asyncCommit?: boolean } = {},
  router: HostRouter | undefined = routerFor(url, options),
): pg.Pool {
  const parsed = parsePostgresUrl(url);
  const connectTimeoutMs = parsed.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  // libpq's parameters that node-postgres does not know (target_session_attrs, …) are left out.
  const single = withServerOption(hostUrl(parsed, parsed.hosts[0]!), NO_JIT, true);
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
  givenUrls.set(pool, url);
  // Without a listener an idle connection's error (a server restart) would crash the process.
  // A pool that is ending has its connections closed on purpose (the store's close cuts those it
  // still holds): nothing failed, and nothing is replaced.
  pool.on('error', (error) => {
    if (!pool.ending) options.onIdleError?.(error);
  });
  return pool;
}

/**
 * The `createdb` command that creates the database `url` names, on its server, as its user (never
 * with the password: createdb asks for it, or reads PGPASSWORD or ~/.pgpass). Several servers are
 * named as libpq reads them (`-h h1,h2 -p 5432,5433`, one port when they share it), and the URL's
 * `target_session_attrs` goes with them (PGTARGETSESSIONATTRS: createdb has no option for it), so
 * that the database is created on the primary, not on a standby named first (which refuses it).
 */
export function createdbCommand(url: string): string {
  const parsed = parsePostgresUrl(url);
  const hosts = parsed.hosts.map((h) => h.host);
  const ports = [...new Set(parsed.hosts.map((h) => String(h.port)))];
  const words: string[] = [];
  if (parsed.sessionAttrs !== 'any') words.push(`PGTARGETSESSIONATTRS=${parsed.sessionAttrs}`);
  words.push('createdb');
  if (hosts.some((host) => host !== '')) words.push('-h', hosts.join(','));
  words.push('-p', ports.length === 1 ? ports[0]! : parsed.hosts.map((h) => h.port).join(','));
  if (parsed.user !== '') words.push('-U', parsed.user);
  words.push(parsed.database || parsed.user);
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
    return error; // a URL that pg reads and parsePostgresUrl does not: the server's message as it is
  }
  return new Error(`${error.message}: create it with ${command}, then run this again`, { cause: error });
}

/** Applies the pending migrations, one instance at a time; answers the versions it applied. */
export async function migrate(pool: pg.Pool): Promise<number[]> {
  try {
    return await migrateSteps(pool);
  } catch (error) {
    // The URL as given: the pool's own names the first server only.
    throw explainMissingDatabase(error, givenUrls.get(pool) ?? pool.options.connectionString ?? '');
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
