import pg from 'pg';
import { type PostgresHost, type PostgresUrl, type SessionAttrs, hostLabel, hostUrl } from '../../wire/postgres-url.js';
import { NoServerError, failoverFate, serverGone } from './errors.js';

// Which server of a multi-host DATABASE_URL a new connection goes to (interface 1.3.0). node-postgres
// connects to one host (brianc/node-postgres#1470), so a pool of this service is given a Client
// class of its own (pg.Pool's `Client` option): before it connects, it asks the pool's HostRouter
// for the server that is what `target_session_attrs` asks, and after it connects it checks that the
// server still is (a failover may have happened in between): one query per new connection, none per
// query. The router remembers the server it found and looks again, host by host in the URL's order
// as libpq does, only when told that server went wrong (refused, shut down, turned standby).

/** How a server was found to be: a primary accepts writes; a standby is in recovery. */
interface Role {
  readonly inRecovery: boolean;
  readonly readOnly: boolean;
}

/** Whether a server of `role` is what `attrs` asks (libpq's rules for target_session_attrs). */
export function fits(attrs: SessionAttrs, role: Role, pass: 'first' | 'second'): boolean {
  switch (attrs) {
    case 'any':
      return true;
    case 'read-write':
      return !role.readOnly;
    case 'read-only':
      return role.readOnly;
    case 'primary':
      return !role.inRecovery;
    case 'standby':
      return role.inRecovery;
    case 'prefer-standby':
      return pass === 'second' || role.inRecovery; // a standby if any, else whatever answers
  }
}

const ROLE_QUERY =
  "SELECT pg_is_in_recovery() AS in_recovery, current_setting('transaction_read_only') = 'on' AS read_only";

async function roleOf(client: pg.Client): Promise<Role> {
  const row = (await client.query<{ in_recovery: boolean; read_only: boolean }>(ROLE_QUERY)).rows[0]!;
  return { inRecovery: row.in_recovery, readOnly: row.read_only };
}

export interface RouterEvents {
  /** The server in use changed (the first one found is a change from none). */
  onHostChange?(now: PostgresHost, was: PostgresHost | undefined): void;
}

/** Per pool: the server in use, found again when it goes wrong. */
export class HostRouter {
  private current: PostgresHost | undefined;
  private looking: Promise<PostgresHost> | undefined;
  /** The server last used, whatever became of it: what the next change names as "was". */
  private last: PostgresHost | undefined;

  constructor(
    readonly url: PostgresUrl,
    /** How long one connection attempt to one server may take (connect_timeout, else 3 s). */
    readonly connectTimeoutMs: number,
    private readonly events: RouterEvents = {},
  ) {}

  /** The server in use, for metrics; undefined while none is known. */
  get host(): PostgresHost | undefined {
    return this.current;
  }

  /** The Client class of every connection of this router's pools and watch. */
  readonly Client: typeof pg.Client = routedClient(this);

  /** Connections waiting now for a server that is what the URL asks (a failover under way). */
  waiting = 0;
  /** How long a new connection waits for one (DATABASE_FAILOVER_WAIT). */
  waitMs = 0;

  /**
   * The server a new connection should go to, looking again every quarter second while none is
   * what the URL asks, for up to `ms`; then the last NoServerError. A database that does not
   * exist fails at once, with the server's 3D000.
   */
  async pickWithin(ms: number): Promise<PostgresHost> {
    const deadline = Date.now() + ms;
    let counted = false;
    try {
      for (;;) {
        try {
          return await this.pick();
        } catch (error) {
          if (missingDatabase(error) || Date.now() >= deadline) throw error;
          if (!counted) {
            counted = true;
            this.waiting += 1;
          }
          await new Promise((resolve) => setTimeout(resolve, Math.min(250, Math.max(0, deadline - Date.now()))));
        }
      }
    } finally {
      if (counted) this.waiting -= 1;
    }
  }

  /** The server a new connection should go to; looks for one when none is known. */
  pick(): Promise<PostgresHost> {
    if (this.current !== undefined) return Promise.resolve(this.current);
    this.looking ??= this.look().finally(() => {
      this.looking = undefined;
    });
    return this.looking;
  }

  /**
   * Whether `pool` writes to a server that is what the URL asks, now: the server in use checked on
   * a pooled connection (one query), or, with none in use, one look without waiting.
   */
  async ready(pool: pg.Pool): Promise<boolean> {
    if (this.current === undefined) await this.pickWithin(0);
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      const role = await roleOf(client);
      if (fits(this.url.sessionAttrs, role, 'second')) return true;
      broken = new Error('not what target_session_attrs asks');
      if (this.current !== undefined) this.forget(this.current);
      return false;
    } finally {
      client.release(broken);
    }
  }

  /** That server went wrong (refused, shut down, a standby now): the next connection looks again. */
  forget(host: PostgresHost): void {
    if (this.current !== undefined && sameHost(this.current, host)) this.current = undefined;
  }

  /** One pass over the hosts in the URL's order (two for prefer-standby), each with a connection of its own. */
  private async look(): Promise<PostgresHost> {
    const problems: string[] = [];
    let missing: pg.DatabaseError | undefined;
    const passes: Array<'first' | 'second'> =
      this.url.sessionAttrs === 'prefer-standby' ? ['first', 'second'] : ['first'];
    for (const pass of passes) {
      for (const host of this.url.hosts) {
        const client = new pg.Client({
          connectionString: hostUrl(this.url, host),
          connectionTimeoutMillis: this.connectTimeoutMs,
        });
        client.on('error', () => {});
        try {
          await client.connect();
          const role = await roleOf(client);
          if (fits(this.url.sessionAttrs, role, pass)) {
            this.use(host);
            return host;
          }
          problems.push(`${hostLabel(host)} is ${role.inRecovery ? 'a standby' : 'read-only'}`);
        } catch (error) {
          if (missingDatabase(error)) missing ??= error;
          problems.push(`${hostLabel(host)}: ${(error as Error).message}`);
        } finally {
          await client.end().catch(() => {});
        }
      }
    }
    // A server that answered that the database does not exist: the start says how to create it
    // (connection.ts, migrate), at once; waiting for another primary would not create it.
    if (missing !== undefined) throw missing;
    throw new NoServerError(
      `no server of DATABASE_URL is ${this.url.sessionAttrs === 'any' ? 'reachable' : this.url.sessionAttrs} (${problems.join('; ')})`,
    );
  }

  private use(host: PostgresHost): void {
    this.current = host;
    if (this.last === undefined || !sameHost(this.last, host)) this.events.onHostChange?.(host, this.last);
    this.last = host;
  }
}

const routers = new WeakMap<pg.Pool, HostRouter>();

/** Records that `pool`'s connections go through `router` (postgres/connection.ts, createPool). */
export function routeThrough(pool: pg.Pool, router: HostRouter): void {
  routers.set(pool, router);
}

/** The router of a pool made over a multi-host URL (or one with target_session_attrs); undefined otherwise. */
export const routerOf = (pool: pg.Pool): HostRouter | undefined => routers.get(pool);

/** `database "…" does not exist` (3D000): no failover cures it. */
const missingDatabase = (error: unknown): error is pg.DatabaseError =>
  error instanceof pg.DatabaseError && error.code === '3D000';

const sameHost = (a: PostgresHost, b: PostgresHost): boolean => a.host === b.host && a.port === b.port;

/**
 * The Client class of a pool over `router`: each new connection goes to the router's server and
 * checks, with one query, that it still is what the URL asks; if not, the router looks again and
 * the connection fails (retryable): the pool's next one goes to the right server.
 */
export function routedClient(router: HostRouter): typeof pg.Client {
  class RoutedClient extends pg.Client {
    /** The server this connection went to. */
    server: PostgresHost | undefined;

    constructor(config: pg.ClientConfig) {
      super(config);
      // The pool's own timeout is this plus the wait for a server; one attempt gets this alone.
      (this as unknown as { _connectionTimeoutMillis: number })._connectionTimeoutMillis = router.connectTimeoutMs;
    }

    override connect(): Promise<this>;
    override connect(callback: (err: Error) => void): void;
    override connect(callback?: (err: Error) => void): Promise<this> | void {
      const done = this.connectRouted();
      if (callback === undefined) return done.then(() => this);
      done.then(() => callback(undefined as unknown as Error), callback);
    }

    private async connectRouted(): Promise<void> {
      const server = await router.pickWithin(router.waitMs);
      this.server = server;
      // Where node-postgres connects: read by its connect, set before it runs.
      const self = this as unknown as {
        host: string;
        port: number;
        connectionParameters: { host: string; port: number };
      };
      self.host = server.host;
      self.port = server.port;
      self.connectionParameters.host = server.host;
      self.connectionParameters.port = server.port;
      try {
        await super.connect();
      } catch (error) {
        router.forget(server);
        throw error;
      }
      if (router.url.sessionAttrs === 'any') return;
      const role = await roleOf(this);
      if (!fits(router.url.sessionAttrs, role, 'second')) {
        router.forget(server);
        await this.end().catch(() => {});
        throw new NoServerError(`${hostLabel(server)} is no longer ${router.url.sessionAttrs}`);
      }
      // A connection that fails (reset, the server shut down) tells the router to look again.
      this.on('error', (error: Error) => {
        if (serverGone(error)) router.forget(server);
      });
    }
  }
  // A query that fails because the server went away or turned standby (25006 on a write) tells the
  // router too: pg-pool's query() then drops the connection (it releases it with the error), and
  // the next one goes where the router finds the primary. Every form of query() is wrapped: a
  // callback last, or the promise it answers.
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with its client as `this`
  const query = pg.Client.prototype.query;
  RoutedClient.prototype.query = function (this: RoutedClient, ...args: unknown[]): unknown {
    const heard = (error: unknown): void => {
      if (error && this.server !== undefined && serverGone(error)) router.forget(this.server);
    };
    const last = args.length - 1;
    if (typeof args[last] === 'function') {
      const callback = args[last] as (error: unknown, ...rest: unknown[]) => void;
      args[last] = (error: unknown, ...rest: unknown[]) => {
        heard(error);
        callback(error, ...rest);
      };
    }
    const answer = (query as (...a: unknown[]) => unknown).apply(this, args);
    if (answer instanceof Promise) answer.catch(heard);
    return answer;
  } as typeof query;
  return RoutedClient;
}

/**
 * Runs `attempt` again while it fails for a failover (failoverFate) and the router's wait has not
 * run out: a request waits for the new primary instead of failing (interface 1.3.0, point 2 of
 * issue 34). `repeatable`: the statement may be sent again even when it may have run (a read, an
 * insert that skips ids it finds, a revocation); otherwise only when it surely did not run.
 * Without a router (one server) it runs once, as before.
 */
export async function throughFailover<T>(
  router: HostRouter | undefined,
  repeatable: boolean,
  attempt: (afterUnknown: boolean) => Promise<T>,
): Promise<T> {
  if (router === undefined) return attempt(false);
  const deadline = Date.now() + router.waitMs;
  // Whether an earlier attempt may have run: the caller reads the last one's answer knowing that.
  let afterUnknown = false;
  for (;;) {
    try {
      return await attempt(afterUnknown);
    } catch (error) {
      const fate = failoverFate(error);
      if (fate === undefined || (fate === 'unknown' && !repeatable) || Date.now() >= deadline) throw error;
      afterUnknown ||= fate === 'unknown';
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
