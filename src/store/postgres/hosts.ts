import pg from 'pg';
import { type PostgresHost, type PostgresUrl, type SessionAttrs, hostLabel } from '../../wire/postgres-url.js';
import { NoServerError, failoverFate, serverGone } from './errors.js';
import {
  type HostState,
  HostProbe,
  type ProbeResult,
  type Role,
  cutConnection,
  silentServerError,
  stateOf,
} from './host-probe.js';

// Which server of a multi-host DATABASE_URL a new connection goes to (interface 1.3.0), and when
// to leave it (1.3.1). node-postgres connects to one host (brianc/node-postgres#1470), so a pool of
// this service is given a Client class of its own (pg.Pool's `Client` option): before it connects,
// it asks the pool's HostRouter for the server that is what `target_session_attrs` asks, and after
// it connects it checks that the server still is. The router knows every connection it made.
//
// While a store is open the router asks every server what it is, once a second, on a connection
// of its own with a deadline (host-probe.ts). The server in use is left, and every connection to it
// cut, when it stops answering within the deadline (a frozen or partitioned primary resets
// nothing), refuses, turns standby, or when another server takes writes on a newer timeline (an
// old primary that still runs after its standby was promoted). A writable server on an older
// timeline than one this router has written to, or of another database system, is never used:
// that is an old primary restarted without being rewound, whose history the writes already left.

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

/** How often every server is asked what it is while the store is open. */
export const PROBE_INTERVAL_MS = 1000;
/** How long the other servers' answers are awaited once one fitting server has answered. */
const LOOK_GRACE_MS = 300;

export interface RouterEvents {
  /** The server in use changed (the first one found is a change from none). */
  onHostChange?(now: PostgresHost, was: PostgresHost | undefined): void;
  /** The server in use was left: it stopped answering, went away, or another took its place. */
  onHostLeft?(host: PostgresHost, why: string): void;
  /** A writable server is refused (an older timeline, another system), or no longer (`why` undefined). */
  onHostRefused?(host: PostgresHost, why: string | undefined): void;
}

/** Why a writable server is refused: its kind (a metric's label) and the words of the log line. */
export interface Refusal {
  readonly kind: 'older_timeline' | 'other_system';
  readonly why: string;
}

/** The history this router has written to: never a writable server behind it. */
interface History {
  readonly system: string;
  readonly timeline: number;
}

/** Per store: the server in use, found again when it goes wrong. */
export class HostRouter {
  private current: PostgresHost | undefined;
  private looking: Promise<PostgresHost> | undefined;
  private rounding: Promise<ProbeResult[]> | undefined;
  /** The server last used, whatever became of it: what the next change names as "was". */
  private last: PostgresHost | undefined;
  private history: History | undefined;
  private readonly refusedHosts = new Map<string, Refusal>();
  private readonly probes: HostProbe[];
  private readonly clients = new Set<RoutedClientLike>();
  private monitor: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    readonly url: PostgresUrl,
    /** How long one connection attempt to one server may take (connect_timeout, else 3 s). */
    readonly connectTimeoutMs: number,
    private readonly events: RouterEvents = {},
  ) {
    this.probes = url.hosts.map((host) => new HostProbe(url, host, connectTimeoutMs));
  }

  /** The server in use, for metrics; undefined while none is known. */
  get host(): PostgresHost | undefined {
    return this.current;
  }

  /** The servers refused now, with why: for metrics. */
  get refused(): ReadonlyMap<string, Refusal> {
    return this.refusedHosts;
  }

  /** The Client class of every connection of this router's pools and watch. */
  readonly Client: typeof pg.Client = routedClient(this);

  /** Connections waiting now for a server that is what the URL asks (a failover under way). */
  waiting = 0;
  /** How long a new connection waits for one (DATABASE_FAILOVER_WAIT). */
  waitMs = 0;

  /** Asks every server what it is, once a PROBE_INTERVAL_MS, until close(). */
  start(): void {
    if (this.monitor !== undefined || this.closed) return;
    const tick = async (): Promise<void> => {
      try {
        this.assess(await this.round());
      } finally {
        if (!this.closed) {
          this.monitor = setTimeout(() => void tick(), PROBE_INTERVAL_MS);
          this.monitor.unref();
        }
      }
    };
    this.monitor = setTimeout(() => void tick(), PROBE_INTERVAL_MS);
    this.monitor.unref();
  }

  /** Stops asking, and cuts every connection still open: nothing waits on a server that does not answer. */
  close(): void {
    this.closed = true;
    clearTimeout(this.monitor);
    for (const probe of this.probes) probe.close();
    for (const client of this.clients) cutConnection(client, new Error('the store is closed'));
    this.clients.clear();
  }

  /** A connection this router made, until it ends. */
  track(client: RoutedClientLike): void {
    this.clients.add(client);
    client.once('end', () => this.clients.delete(client));
  }

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
      const state = await stateOf(client);
      if (fits(this.url.sessionAttrs, state.role, 'second') && this.refusal(state) === undefined) return true;
      broken = new Error('not what target_session_attrs asks');
      if (this.current !== undefined) this.forget(this.current);
      return false;
    } finally {
      client.release(broken);
    }
  }

  /** That server went wrong (refused, shut down, a standby now): the next connection looks again. */
  forget(host: PostgresHost): void {
    if (this.current !== undefined && sameHost(this.current, host)) {
      this.current = undefined;
    }
  }

  /** Leaves the server in use and cuts every connection to it: their statements fail and are retried elsewhere. */
  private leave(host: PostgresHost, why: string): void {
    this.forget(host);
    this.events.onHostLeft?.(host, why);
    this.cutWhere((server) => sameHost(server, host));
  }

  /** Cuts every connection to a server `which` names: its statement fails, and is retried as its fate allows. */
  private cutWhere(which: (server: PostgresHost) => boolean): void {
    for (const client of this.clients) {
      if (client.server !== undefined && which(client.server)) cutConnection(client, silentServerError(client.server));
    }
  }

  /** Why a writable server must not be written to: undefined when it may. */
  private refusal(state: HostState): Refusal | undefined {
    if (state.timeline === null || this.history === undefined) return undefined;
    if (state.system !== this.history.system) {
      return {
        kind: 'other_system',
        why: `it belongs to another database system (${state.system}, not ${this.history.system})`,
      };
    }
    if (state.timeline < this.history.timeline) {
      return {
        kind: 'older_timeline',
        why: `its timeline ${state.timeline} is older than timeline ${this.history.timeline}, which this instance wrote to (an old primary not rewound)`,
      };
    }
    return undefined;
  }

  /** One round: every server asked at once; the answers, in the URL's order. */
  private round(): Promise<ProbeResult[]> {
    this.rounding ??= this.askAll().finally(() => {
      this.rounding = undefined;
    });
    return this.rounding;
  }

  /**
   * Every server asked at once. Answers are awaited until all are in, or until LOOK_GRACE_MS after
   * the first server that fits answered: a silent server must not hold up a choice among those that
   * answer (it would cost its whole deadline), and servers that answer do so within milliseconds.
   */
  private async askAll(): Promise<ProbeResult[]> {
    const results: Array<ProbeResult | undefined> = this.probes.map(() => undefined);
    let fitted: () => void = () => {};
    const firstFit = new Promise<void>((resolve) => (fitted = resolve));
    const all = Promise.all(
      this.probes.map(async (probe, i) => {
        const result = await probe.probe();
        results[i] = result;
        if (result.state !== undefined && fits(this.url.sessionAttrs, result.state.role, 'second')) fitted();
      }),
    );
    await Promise.race([all, firstFit.then(() => new Promise((resolve) => setTimeout(resolve, LOOK_GRACE_MS)))]);
    for (const result of results) if (result !== undefined) this.noteRefusal(result);
    return results.map(
      (result, i) =>
        result ?? { host: this.probes[i]!.host, problem: `${hostLabel(this.probes[i]!.host)}: no answer yet` },
    );
  }

  private noteRefusal(result: ProbeResult): void {
    const key = hostLabel(result.host);
    const refused = result.state === undefined ? undefined : this.refusal(result.state);
    if (refused === undefined) {
      if (result.state !== undefined && this.refusedHosts.delete(key))
        this.events.onHostRefused?.(result.host, undefined);
      return;
    }
    if (this.refusedHosts.get(key)?.why === refused.why) return;
    this.refusedHosts.set(key, refused);
    this.events.onHostRefused?.(result.host, refused.why);
  }

  /** The server to use of a round's answers, or undefined when none fits. */
  private choose(results: readonly ProbeResult[], pass: 'first' | 'second'): ProbeResult | undefined {
    const fitting = results.filter(
      (r) =>
        r.state !== undefined && fits(this.url.sessionAttrs, r.state.role, pass) && this.refusal(r.state) === undefined,
    );
    if (this.url.sessionAttrs !== 'read-write' && this.url.sessionAttrs !== 'primary') return fitting[0];
    // Of servers that take writes, the newest timeline; the URL's order between equals.
    let best: ProbeResult | undefined;
    for (const r of fitting) if (best === undefined || (r.state!.timeline ?? 0) > (best.state!.timeline ?? 0)) best = r;
    return best;
  }

  /** What a round says of the server in use: leave it when it is gone, silent, or overtaken. */
  private assess(results: readonly ProbeResult[]): void {
    if (this.closed) return;
    // Connections left on a server that is not the one in use (made before a move, whatever made
    // it) are cut, or the pool would go on handing them out: to a silent server they hang, to an
    // old primary they write.
    const host = this.current;
    if (host !== undefined) this.cutWhere((server) => !sameHost(server, host));
    else {
      const gone = results.filter((r) => r.state === undefined && (r.silent === true || serverGone(r.error)));
      this.cutWhere((server) => gone.some((r) => sameHost(r.host, server)));
    }
    if (host === undefined) return;
    const mine = results.find((r) => sameHost(r.host, host));
    if (mine === undefined) return;
    if (mine.state === undefined) {
      if (mine.silent === true || serverGone(mine.error))
        this.leave(host, mine.silent === true ? 'it stopped answering' : (mine.problem ?? 'it went away'));
      return;
    }
    if (!fits(this.url.sessionAttrs, mine.state.role, 'second'))
      return this.leave(host, `it is no longer ${this.url.sessionAttrs}`);
    const refused = this.refusal(mine.state);
    if (refused !== undefined) return this.leave(host, refused.why);
    this.note(mine.state);
    const best = this.choose(results, 'second');
    if (best !== undefined && !sameHost(best.host, host) && (best.state!.timeline ?? 0) > (mine.state.timeline ?? 0)) {
      this.leave(host, `${hostLabel(best.host)} takes writes on a newer timeline (${best.state!.timeline})`);
    }
  }

  /** Records the history a writable server in use is on. */
  private note(state: HostState): void {
    if (state.timeline === null) return;
    if (this.history === undefined || state.timeline > this.history.timeline) {
      this.history = { system: this.history?.system ?? state.system, timeline: state.timeline };
    }
  }

  /** One round over the hosts (a second pass for prefer-standby): the one to use, else why none. */
  private async look(): Promise<PostgresHost> {
    const results = await this.round();
    const chosen =
      this.choose(results, 'first') ??
      (this.url.sessionAttrs === 'prefer-standby' ? this.choose(results, 'second') : undefined);
    if (chosen !== undefined) {
      this.use(chosen.host, chosen.state!);
      return chosen.host;
    }
    // A server that answered that the database does not exist: the start says how to create it
    // (connection.ts, migrate), at once; waiting for another primary would not create it.
    const missing = results.find((r) => missingDatabase(r.error));
    if (missing !== undefined) throw missing.error;
    const problems = results.map((r) => {
      if (r.state === undefined) return r.problem ?? `${hostLabel(r.host)}: no answer`;
      const refused = this.refusal(r.state);
      if (refused !== undefined) return `${hostLabel(r.host)} is refused: ${refused.why}`;
      return `${hostLabel(r.host)} is ${r.state.role.inRecovery ? 'a standby' : 'read-only'}`;
    });
    throw new NoServerError(
      `no server of DATABASE_URL is ${this.url.sessionAttrs === 'any' ? 'reachable' : this.url.sessionAttrs} (${problems.join('; ')})`,
    );
  }

  private use(host: PostgresHost, state: HostState): void {
    this.current = host;
    this.note(state);
    if (this.last === undefined || !sameHost(this.last, host)) this.events.onHostChange?.(host, this.last);
    this.last = host;
  }
}

/** What the router needs of a connection it made. */
interface RoutedClientLike extends pg.Client {
  readonly server: PostgresHost | undefined;
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
      // Known to the router from here on: leaving this server cuts this connection too, while it
      // is still being made or checked (a silent server answers neither).
      router.track(this);
      // A connection that fails (reset, the server shut down, cut by the router) tells the router
      // to look again. Listening from the start: a cut while the connection is made or checked
      // emits 'error', which with no listener would end the process.
      this.on('error', (error: Error) => {
        if (serverGone(error)) router.forget(server);
      });
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
        if (router.url.sessionAttrs !== 'any') {
          const state = await stateOf(this);
          if (!fits(router.url.sessionAttrs, state.role, 'second')) {
            await this.end().catch(() => {});
            throw new NoServerError(`${hostLabel(server)} is no longer ${router.url.sessionAttrs}`);
          }
        }
      } catch (error) {
        router.forget(server);
        // No statement was sent on this connection: whatever cut it, what waits for it may be sent
        // elsewhere (failoverFate reads NoServerError as not run). The server's own refusals
        // (a wrong password, a missing database) stay what they are.
        if (error instanceof pg.DatabaseError || error instanceof NoServerError) throw error;
        throw new NoServerError(`${hostLabel(server)}: ${(error as Error).message}`, { cause: error });
      }
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
 * run out: a request waits for the new primary instead of failing (interface 1.3.0;
 * docs/api.md#postgresql-failover-and-shutdown). `repeatable`: the statement may be sent again even
 * when it may have run (a read, an insert that skips ids it finds, a revocation); otherwise only
 * when it surely did not run. Without a router (one server) it runs once.
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
