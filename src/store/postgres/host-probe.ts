import pg from 'pg';
import { type PostgresHost, type PostgresUrl, hostLabel, hostUrl } from '../../wire/postgres-url.js';

// What each server of a multi-host DATABASE_URL is, asked on a connection of its own with a
// deadline: whether it answers at all, whether it takes writes, on which timeline, and which
// database system it belongs to. A server that does not answer within the deadline is silent
// (frozen, partitioned: no reset, no close), which no socket error would ever say.

/** How a server was found to be: a primary accepts writes; a standby is in recovery. */
export interface Role {
  readonly inRecovery: boolean;
  readonly readOnly: boolean;
}

export interface HostState {
  readonly role: Role;
  /**
   * The timeline a server that is not in recovery writes on (its WAL insert timeline: a promotion
   * starts a new one), null on a standby. An old primary restarted without being rewound writes
   * on the timeline its standby left when it was promoted.
   */
  readonly timeline: number | null;
  /** pg_control_system()'s system_identifier: servers of one cluster share it, a new initdb has another. */
  readonly system: string;
}

export interface ProbeResult {
  readonly host: PostgresHost;
  /** What the server answered; undefined when it did not (see silent and problem). */
  readonly state?: HostState;
  /** No answer within the deadline: the connection was cut by this side. */
  readonly silent?: boolean;
  /** What went wrong, for logs and the NoServerError that lists every server. */
  readonly problem?: string;
  /** The error itself: a missing database (3D000) is told at once, not waited out. */
  readonly error?: unknown;
}

// Readable by any role: pg_control_system() and pg_walfile_name() need no privilege.
const PROBE_QUERY = `SELECT pg_is_in_recovery() AS in_recovery,
  current_setting('transaction_read_only') = 'on' AS read_only,
  CASE WHEN pg_is_in_recovery() THEN NULL
    ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint END AS timeline,
  (SELECT system_identifier::text FROM pg_control_system()) AS system`;

interface ProbeRow {
  in_recovery: boolean;
  read_only: boolean;
  timeline: string | null;
  system: string;
}

/** A server's state, asked on `client` (a probe's, or a connection just made). */
export async function stateOf(client: pg.Client): Promise<HostState> {
  const row = (await client.query<ProbeRow>(PROBE_QUERY)).rows[0]!;
  return {
    role: { inRecovery: row.in_recovery, readOnly: row.read_only },
    timeline: row.timeline === null ? null : Number(row.timeline),
    system: row.system,
  };
}

/**
 * Cuts a connection at once, whatever its server does: its active query fails with `error`, and
 * no goodbye is waited for (a silent server never answers one, and the half-closed socket would
 * keep the process alive). node-postgres has no public call for this; test/store/pg-internals.test.ts
 * fails when the field it relies on changes.
 */
export function cutConnection(client: pg.Client, error: Error): void {
  const stream = (client as unknown as { connection?: { stream?: { destroy(error?: Error): void } } }).connection
    ?.stream;
  stream?.destroy(error);
}

/** The error a connection cut by this side carries: the statement on it may have run (CUT in errors.ts). */
export function silentServerError(host: PostgresHost): Error {
  return Object.assign(new Error(`${hostLabel(host)} stopped answering: connection closed by this side`), {
    code: 'ETIMEDOUT',
  });
}

/** One server's probe: a connection kept open between rounds, replaced when it fails. */
export class HostProbe {
  private client: pg.Client | undefined;
  /** The probe in flight: a round that returned before a slow host answered does not ask it twice. */
  private pending: Promise<ProbeResult> | undefined;

  constructor(
    private readonly url: PostgresUrl,
    readonly host: PostgresHost,
    /** How long one probe (a connection, when one must be made, and the query) may take. */
    private readonly deadlineMs: number,
  ) {}

  probe(): Promise<ProbeResult> {
    this.pending ??= this.ask().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async ask(): Promise<ProbeResult> {
    const client = this.client ?? this.open();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'silent'>((resolve) => {
      timer = setTimeout(() => resolve('silent'), this.deadlineMs);
    });
    const answer = (async () => {
      if (client !== this.client) {
        this.client = client;
        await client.connect();
      }
      return stateOf(client);
    })();
    answer.catch(() => {}); // settled by the race below; a late failure has nothing left to tell
    try {
      const state = await Promise.race([answer, deadline]);
      if (state === 'silent') {
        this.drop(client, silentServerError(this.host));
        return {
          host: this.host,
          silent: true,
          problem: `${hostLabel(this.host)}: no answer within ${this.deadlineMs} ms`,
        };
      }
      return { host: this.host, state };
    } catch (error) {
      this.drop(client, error as Error);
      return { host: this.host, problem: `${hostLabel(this.host)}: ${(error as Error).message}`, error };
    } finally {
      clearTimeout(timer);
    }
  }

  close(): void {
    if (this.client !== undefined) this.drop(this.client, new Error('closed'));
  }

  private open(): pg.Client {
    const client = new pg.Client({
      connectionString: hostUrl(this.url, this.host),
      connectionTimeoutMillis: this.deadlineMs,
    });
    client.on('error', () => {});
    return client;
  }

  private drop(client: pg.Client, error: Error): void {
    if (this.client === client) this.client = undefined;
    cutConnection(client, error);
  }
}
