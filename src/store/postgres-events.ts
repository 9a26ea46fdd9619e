import pg from 'pg';
import { Batcher } from './batcher.js';
import { classifyPostgresError, inTransaction } from './postgres-errors.js';
import { DB_NOW_MS, EVENT_CHANNEL, EVENT_ORDER_LOCK } from './postgres-statements.js';
import { pingPayload } from './event-payload.js';
import {
  type AttemptOutcome,
  type AttemptRecorded,
  type ClaimedDelivery,
  type DeliveryRecord,
  type DeliveryType,
  type DisabledReason,
  type EventRecord,
  type EventRow,
  type EventType,
  type NewWebhookRecord,
  PING_TYPE,
  type WebhookRecord,
} from './store.js';

// Events, webhooks and deliveries on PostgreSQL. Every time here is the database's clock
// (DB_NOW_MS): leases, retries and retention never depend on which instance's clock is right.

const NOW = DB_NOW_MS;
const OWNED = '($2::text IS NULL OR owner = $2)';

/** The deliveries of the events in `ev`: one per active webhook that wants the type and may see the owner. */
const MAKE_DELIVERIES = `INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
    SELECT w.id, ev.id, ev.type, 'pending', 0, ev.created_at, ev.created_at FROM ev JOIN webhooks w
      ON w.status = 'active' AND (w.owner = ev.owner OR w.all_plants)
      AND position(' ' || ev.type || ' ' IN ' ' || w.events || ' ') > 0`;
const ANY_ACTIVE = "EXISTS (SELECT 1 FROM webhooks WHERE status = 'active')";

const SQL = {
  // A dispatcher's look: the deliveries of up to $1 events after the cursor, the cursor moved past
  // them, in one statement that holds the cursor's row. Event ids commit in id order (the advisory
  // lock of postgres-statements.ts), so no event can still commit behind it. (A scalar subquery, so
  // the events are an index range from the cursor, never a scan from the first.) Another instance
  // fanning out already holds the row: SKIP LOCKED leaves it the work instead of waiting. With no
  // active webhook nothing is owed and nothing is written.
  fanOut: `WITH cur AS (SELECT fanned_through FROM delivery_cursor WHERE ${ANY_ACTIVE} FOR UPDATE SKIP LOCKED),
    ev AS (SELECT id, type, owner, created_at FROM events WHERE id > (SELECT fanned_through FROM cur)
      ORDER BY id LIMIT $1),
    made AS (${MAKE_DELIVERIES}),
    moved AS (UPDATE delivery_cursor SET fanned_through = greatest(fanned_through, (SELECT max(id) FROM ev))
      WHERE EXISTS (SELECT 1 FROM ev))
    SELECT 1`,
  // Before the set of active webhooks changes (a webhook created or enabled, one about to be
  // disabled) and before deliveries are listed: every event so far, waiting for the row if need be;
  // with no active webhook the cursor just jumps to the newest event.
  fanOutAll: `WITH cur AS (SELECT fanned_through FROM delivery_cursor FOR UPDATE),
    ev AS (SELECT id, type, owner, created_at FROM events WHERE id > (SELECT fanned_through FROM cur) AND ${ANY_ACTIVE}),
    made AS (${MAKE_DELIVERIES} RETURNING 1)
    UPDATE delivery_cursor SET fanned_through = greatest(fanned_through, (SELECT coalesce(max(id), 0) FROM events))
    -- Read first, so the row is locked and the deliveries made before it changes (a CTE no one
    -- reads would run after this UPDATE, and find its row already changed by this statement).
    WHERE EXISTS (SELECT 1 FROM cur) AND (SELECT count(*) FROM made) >= 0`,
  // Whether an attempt that failed may disable its webhook by the 5-day rule ($2 ms; a minute early,
  // so the limit cannot pass unseen before the record), so the events owed to it are fanned out first.
  mayDisable: `SELECT 1 FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
    WHERE d.id = $1 AND w.status = 'active' AND coalesce(w.failing_since, ${NOW}) <= ${NOW} - $2 + 60000`,
  // Taken before a change to the set of active webhooks, until its commit: no event commits
  // meanwhile, so every event is fanned out with the webhooks active when it committed.
  holdEvents: `SELECT pg_advisory_xact_lock(${EVENT_ORDER_LOCK})`,
  horizon: 'SELECT pruned_through FROM event_horizon',
  lastId: 'SELECT coalesce(max(id), 0) AS id FROM events',
  // One statement: the oldest events past retention, the horizon raised to the newest of them.
  // Read in id order below the first event still kept (found through events_created_at), so a log
  // with nothing old yet costs an index lookup, not a scan of every event in id order.
  prune: `WITH gone AS (
      DELETE FROM events WHERE id IN (SELECT id FROM events
        WHERE id < coalesce((SELECT id FROM events WHERE created_at >= ${NOW} - $1 ORDER BY created_at LIMIT 1),
            9223372036854775807)
          AND created_at < ${NOW} - $1
          AND (id <= (SELECT fanned_through FROM delivery_cursor) OR NOT ${ANY_ACTIVE}) ORDER BY id LIMIT $2)
      RETURNING id),
    raised AS (UPDATE event_horizon SET pruned_through = greatest(pruned_through, (SELECT max(id) FROM gone))
      WHERE EXISTS (SELECT 1 FROM gone)),
    -- In created_at order, so through deliveries_created_at from the oldest, never a scan of the table.
    old AS (DELETE FROM deliveries WHERE id IN (
      SELECT id FROM deliveries WHERE created_at < ${NOW} - $1 AND status != 'pending' ORDER BY created_at LIMIT $2)
      RETURNING id),
    -- Their attempt log goes with them (no foreign key: a check per attempt recorded would cost more).
    old_attempts AS (DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM old))
    SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM old) AS n`,
  // Run after the owner's advisory lock, in the same transaction: the count sees every webhook
  // committed before it, so two creates at once cannot pass the limit together.
  lockOwner: "SELECT pg_advisory_xact_lock(hashtext('plant-store webhooks ' || $1::text))",
  createWebhook: `INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at, description)
    SELECT $1, $2, $3, $4, $5, $6, $7, $9, $10
    WHERE (SELECT count(*) FROM webhooks WHERE owner = $2) < $8 RETURNING id`,
  listWebhooks: `SELECT * FROM webhooks WHERE ($1::text IS NULL OR owner = $1) ORDER BY created_at, id`,
  deleteWebhook: `WITH w AS (DELETE FROM webhooks WHERE id = $1 AND ${OWNED} RETURNING id),
    d AS (DELETE FROM deliveries WHERE webhook_id IN (SELECT id FROM w) RETURNING id),
    a AS (DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM d))
    SELECT id FROM w`,
  enableWebhook: `UPDATE webhooks SET status = 'active', failing_since = NULL, disabled_reason = NULL
    WHERE id = $1 AND ${OWNED} RETURNING id`,
  findWebhook: `SELECT id FROM webhooks WHERE id = $1 AND ${OWNED}`,
  listDeliveries: 'SELECT * FROM deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2',
  // The lease stays: a delivery in flight is not put in flight a second time.
  retryDelivery: `UPDATE deliveries SET status = 'pending', next_attempt_at = ${NOW}
    WHERE id = $1 AND webhook_id = $2 AND webhook_id IN (SELECT id FROM webhooks WHERE id = $2 AND ($3::text IS NULL OR owner = $3))
    RETURNING id`,
  // Each active webhook's earliest due deliveries that no other dispatcher holds (its share, less
  // what this one already has out), read through deliveries_due_by_webhook: a claim costs the same
  // whatever the backlog. SKIP LOCKED passes over rows another dispatcher is leasing right now.
  claim: `WITH candidate AS (
      SELECT d.id FROM webhooks w CROSS JOIN LATERAL (
        SELECT id FROM deliveries
        WHERE webhook_id = w.id AND status = 'pending' AND next_attempt_at <= ${NOW}
          AND (lease_until IS NULL OR lease_until < ${NOW})
        ORDER BY next_attempt_at, id
        LIMIT greatest(0, $3 - coalesce(($5::jsonb ->> w.id)::int, 0))
        FOR UPDATE SKIP LOCKED) d
      WHERE w.status = 'active'
      LIMIT $4),
    -- Pings are sent whatever the webhook's status: those of disabled webhooks (few), each through
    -- deliveries_due_pings. Not one scan of every pending delivery for the pings among them: with
    -- statistics taken while little was pending, PostgreSQL read deliveries_due_by_webhook whole
    -- for it on every claim, and delivered half as fast behind a burst (BENCHMARKS.md).
    pings AS (
      SELECT d.id FROM webhooks w CROSS JOIN LATERAL (
        SELECT id FROM deliveries
        WHERE webhook_id = w.id AND status = 'pending' AND type = '${PING_TYPE}' AND next_attempt_at <= ${NOW}
          AND (lease_until IS NULL OR lease_until < ${NOW})
        ORDER BY next_attempt_at, id
        LIMIT $4
        FOR UPDATE SKIP LOCKED) d
      WHERE w.status = 'disabled'
      LIMIT greatest(0, $4 - (SELECT count(*) FROM candidate))),
    leased AS (UPDATE deliveries SET lease_until = ${NOW} + $2, lease_owner = $1
      WHERE id IN (SELECT id FROM candidate UNION ALL SELECT id FROM pings)
      RETURNING id, event_id, type, attempts, schedule_from, webhook_id)
    SELECT l.id, l.event_id, l.type, l.attempts, l.schedule_from, e.payload, w.id AS webhook_id, w.owner, w.url,
      w.secret, w.previous_secret, w.previous_secret_until
    FROM leased l JOIN webhooks w ON w.id = l.webhook_id LEFT JOIN events e ON e.id = l.event_id
    ORDER BY l.id`,
  // The webhook's row is written only when its health changes: a row every delivery of a webhook
  // updated would make the concurrent records of its deliveries wait for each other's commits.
  record: `WITH d AS (
      UPDATE deliveries SET status = $3, attempts = attempts + 1, last_status = $4, last_error = $5,
        next_attempt_at = CASE WHEN $3 = 'pending' THEN ${NOW} + $6 END, lease_until = NULL, lease_owner = NULL
      WHERE id = $1 AND lease_owner = $2 RETURNING id, webhook_id, attempts),
    logged AS (INSERT INTO delivery_attempts (delivery_id, attempt, at, status, duration_ms, error, response)
      SELECT id, attempts, ${NOW}, $4, $10, $5, $11 FROM d),
    w AS (UPDATE webhooks w SET
      failing_since = CASE WHEN $7 THEN NULL ELSE coalesce(w.failing_since, ${NOW}) END,
      status = CASE WHEN $8::text IS NOT NULL
          OR (NOT $7 AND coalesce(w.failing_since, ${NOW}) <= ${NOW} - $9) THEN 'disabled' ELSE w.status END,
      disabled_reason = CASE WHEN $8::text IS NOT NULL THEN $8
          WHEN (NOT $7 AND coalesce(w.failing_since, ${NOW}) <= ${NOW} - $9) THEN '${'failing' satisfies DisabledReason}'
          ELSE w.disabled_reason END
    FROM d WHERE w.id = d.webhook_id AND (NOT $7 OR $8::text IS NOT NULL OR w.failing_since IS NOT NULL)
    RETURNING w.status)
    SELECT webhook_id, (SELECT status FROM w) AS webhook_status FROM d`,
  // Before a record that may disable the webhook: its status, the row locked to the commit.
  statusOf: `SELECT w.status FROM webhooks w JOIN deliveries d ON d.webhook_id = w.id WHERE d.id = $1 FOR UPDATE OF w`,
  // The deliveries of a batch that were delivered ($1 ids, $2 holders, $3 statuses): one statement
  // and one commit for what a dispatcher's sends finished meanwhile, not one each. A webhook's row is
  // written only if it was failing (the record above, with a healthy outcome).
  // Their lines in the attempt log ($4 durations, $5 answers) are written by the same statement.
  recordDelivered: `WITH input AS (SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::int[], $5::text[])
      AS t(id, holder, last_status, duration_ms, response)),
    d AS (UPDATE deliveries SET status = 'delivered', attempts = attempts + 1, last_status = input.last_status,
        last_error = NULL, next_attempt_at = NULL, lease_until = NULL, lease_owner = NULL
      FROM input WHERE deliveries.id = input.id AND deliveries.lease_owner = input.holder
      RETURNING deliveries.id, deliveries.webhook_id, deliveries.attempts, input.last_status, input.duration_ms,
        input.response),
    logged AS (INSERT INTO delivery_attempts (delivery_id, attempt, at, status, duration_ms, error, response)
      SELECT id, attempts, ${NOW}, last_status, duration_ms, NULL, response FROM d),
    w AS (UPDATE webhooks SET failing_since = NULL
      WHERE id IN (SELECT webhook_id FROM d) AND failing_since IS NOT NULL)
    SELECT id FROM d`,
  release: 'UPDATE deliveries SET lease_until = NULL, lease_owner = NULL WHERE lease_owner = $1',
  // The earliest pending delivery of an active webhook that no one holds, read in index order.
  // 0 while events wait behind the cursor for an active webhook.
  nextDue: `SELECT CASE
      WHEN ${ANY_ACTIVE} AND (SELECT fanned_through FROM delivery_cursor) < (SELECT coalesce(max(id), 0) FROM events)
        THEN 0
      ELSE (SELECT greatest(0, d.next_attempt_at - ${NOW}) FROM deliveries d
        JOIN webhooks w ON w.id = d.webhook_id
        WHERE d.status = 'pending' AND (w.status = 'active' OR d.type = '${PING_TYPE}')
          AND (d.lease_until IS NULL OR d.lease_until < ${NOW})
        ORDER BY d.next_attempt_at LIMIT 1) END AS wait`,
} as const;

export interface Row {
  [column: string]: unknown;
}

const big = (v: unknown): bigint => BigInt(v as string);
const optional = (v: unknown): number | null => (v === null ? null : Number(v));

export const toWebhook = (r: Row): WebhookRecord => ({
  id: r.id as string,
  owner: r.owner as string,
  allPlants: r.all_plants as boolean,
  url: r.url as string,
  events: (r.events as string).split(' ') as EventType[],
  status: r.status as WebhookRecord['status'],
  secret: r.secret as string,
  createdAt: Number(r.created_at),
  description: r.description as string,
  failingSince: optional(r.failing_since),
  disabledReason: r.disabled_reason as DisabledReason | null,
  previousSecret: r.previous_secret as string | null,
  previousSecretUntil: optional(r.previous_secret_until),
});

export const toDelivery = (r: Row): DeliveryRecord => ({
  id: big(r.id),
  webhookId: r.webhook_id as string,
  eventId: r.type === PING_TYPE ? null : big(r.event_id),
  type: r.type as DeliveryType,
  status: r.status as DeliveryRecord['status'],
  attempts: Number(r.attempts),
  lastStatus: optional(r.last_status),
  lastError: r.last_error as string | null,
  nextAttemptAt: optional(r.next_attempt_at),
  createdAt: Number(r.created_at),
});

/**
 * In a transaction about to change the set of active webhooks: every event so far fanned out, and
 * no event committing until that transaction commits (the event-order lock, held to its end), so
 * every event goes to the webhooks active when it committed.
 */
export async function fanOutHoldingEvents(client: pg.PoolClient): Promise<void> {
  await client.query(SQL.holdEvents);
  await client.query(SQL.fanOutAll);
}

/** A delivered attempt to record (recordDelivered). */
interface Delivered {
  readonly id: bigint;
  readonly holder: string;
  readonly outcome: AttemptOutcome;
}

/**
 * A read of the log, of `columns` in id order, and its values: every owner's events or one's, of
 * every type or of `types` (?types=, issue 23: the range on id, or on (owner, id), stays the
 * index's, the type a filter).
 */
function logRead(
  columns: string,
  after: bigint,
  owner: string | null,
  limit: number,
  types: readonly EventType[] | null,
): [string, unknown[]] {
  const values: unknown[] = [after, limit];
  let where = 'id > $1';
  if (owner !== null) where += ` AND owner = $${values.push(owner)}`;
  if (types !== null) where += ` AND type = ANY($${values.push(types)}::text[])`;
  return [`SELECT ${columns} FROM events WHERE ${where} ORDER BY events.id LIMIT $2`, values];
}

/** The most delivered attempts one statement records. */
const RECORD_BATCH = 256;
/** A record not answered by then fails: the lease runs out and the delivery is sent again. */
const RECORD_WAIT_MS = 15_000;

export class PostgresEvents {
  /**
   * Delivered attempts, recorded in batches: one statement while the previous one runs, so that
   * what finishes meanwhile shares the next (a statement and a commit each would make the records,
   * not the sends, a dispatcher's limit).
   */
  private readonly delivered = new Batcher<Delivered, boolean>(
    1,
    RECORD_BATCH,
    (items) => this.recordDelivered(items),
    RECORD_WAIT_MS,
    () =>
      new Error('recording the attempt took too long; if it was not recorded, its lease runs out and it is sent again'),
  );

  /**
   * `dispatch`: the pool of the dispatcher's leases and attempt records, whose connections commit
   * without waiting for the WAL's flush (synchronous_commit off). A crash may lose the last of
   * them, which costs a repeat, never a delivery (at least once: the lease runs out, the delivery
   * is sent again), as on SQLite; the API's writes keep their flush on the other pool.
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly dispatch: () => pg.Pool = () => pool,
  ) {}

  private async query(text: string, values: unknown[], pool = this.pool): Promise<Row[]> {
    try {
      return (await pool.query<Row>(text, values)).rows;
    } catch (error) {
      throw classifyPostgresError(error);
    }
  }

  async readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null,
  ): Promise<EventRecord[]> {
    const rows = await this.query(...logRead('id, type, owner, payload, created_at', after, owner, limit, types));
    return rows.map((r) => ({
      id: big(r.id),
      type: r.type as EventType,
      owner: r.owner as string,
      payload: r.payload as string,
      createdAt: Number(r.created_at),
    }));
  }

  /**
   * Rows as arrays (rowMode), the id as text: what a page of JSON is written from. The read orders
   * by events.id: a bare `id` would name the text column, and 10 would come before 9.
   */
  async readEventRows(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null,
  ): Promise<EventRow[]> {
    const [text, values] = logRead('id::text, type, payload, created_at::float8', after, owner, limit, types);
    try {
      return (await this.pool.query<EventRow & unknown[]>({ text, values, rowMode: 'array' })).rows;
    } catch (error) {
      throw classifyPostgresError(error);
    }
  }

  async eventHorizon(): Promise<bigint> {
    return big((await this.query(SQL.horizon, []))[0]!.pruned_through);
  }

  async lastEventId(): Promise<bigint> {
    return big((await this.query(SQL.lastId, []))[0]!.id);
  }

  async prune(retentionMs: number, batch: number): Promise<number> {
    return Number((await this.query(SQL.prune, [retentionMs, batch]))[0]!.n);
  }

  async createWebhook(w: NewWebhookRecord, max: number): Promise<boolean> {
    const values = [
      ...[w.id, w.owner, w.allPlants, w.url, w.events.join(' '), w.status, w.secret],
      ...[max, w.createdAt, w.description ?? ''],
    ];
    return inTransaction(this.pool, async (client) => {
      await client.query(SQL.lockOwner, [w.owner]);
      await fanOutHoldingEvents(client); // the events so far go to the webhooks of their time, not to this one
      return (await client.query(SQL.createWebhook, values)).rows.length === 1;
    });
  }

  async listWebhooks(owner: string | null): Promise<WebhookRecord[]> {
    return (await this.query(SQL.listWebhooks, [owner])).map(toWebhook);
  }

  async deleteWebhook(id: string, owner: string | null): Promise<boolean> {
    return (await this.query(SQL.deleteWebhook, [id, owner])).length === 1;
  }

  async enableWebhook(id: string, owner: string | null): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      await fanOutHoldingEvents(client); // the events of its disabled time are not owed to it
      return (await client.query(SQL.enableWebhook, [id, owner])).rows.length === 1;
    });
  }

  async listDeliveries(webhookId: string, owner: string | null, limit: number): Promise<DeliveryRecord[] | undefined> {
    if ((await this.query(SQL.findWebhook, [webhookId, owner])).length === 0) return undefined;
    await this.query(SQL.fanOutAll, [], this.dispatch()); // none still owed
    return (await this.query(SQL.listDeliveries, [webhookId, limit])).map(toDelivery);
  }

  async retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean> {
    return (await this.query(SQL.retryDelivery, [deliveryId, webhookId, owner])).length === 1;
  }

  async claim(
    holder: string,
    leaseMs: number,
    limit: number,
    perWebhook: number,
    busy: ReadonlyMap<string, number>,
    fanOut: number,
  ): Promise<ClaimedDelivery[]> {
    await this.query(SQL.fanOut, [fanOut], this.dispatch());
    const rows = await this.query(
      SQL.claim,
      [holder, leaseMs, perWebhook, limit, JSON.stringify(Object.fromEntries(busy))],
      this.dispatch(),
    );
    return rows.map((r) => ({
      id: big(r.id),
      eventId: r.type === PING_TYPE ? null : big(r.event_id),
      type: r.type as DeliveryType,
      attempts: Number(r.attempts),
      scheduleFrom: Number(r.schedule_from),
      payload: r.type === PING_TYPE ? pingPayload(r.webhook_id as string) : ((r.payload as string | null) ?? ''),
      webhook: {
        id: r.webhook_id as string,
        owner: r.owner as string,
        url: r.url as string,
        secret: r.secret as string,
        previousSecret: r.previous_secret as string | null,
        previousSecretUntil: optional(r.previous_secret_until),
      },
    }));
  }

  async recordAttempt(id: bigint, holder: string, o: AttemptOutcome): Promise<AttemptRecorded> {
    if (
      !o.healthy &&
      (o.disable !== null || (await this.query(SQL.mayDisable, [id, o.disableWhenFailingForMs])).length > 0)
    ) {
      // The events committed while it was active are owed to it: fanned out before it stops, with
      // no event committing between the two (most of a backlog first, without holding events up).
      await this.query(SQL.fanOutAll, [], this.dispatch());
      return inTransaction(this.dispatch(), async (client) => {
        await fanOutHoldingEvents(client);
        // Its status before, the row locked: whether this record is the one that disabled it.
        const before = (await client.query<Row>(SQL.statusOf, [id])).rows[0]?.status;
        const rows = (await client.query<Row>(SQL.record, this.recordValues(id, holder, o))).rows;
        if (rows.length === 0) return false;
        return before === 'active' && rows[0]!.webhook_status === 'disabled' ? 'disabled' : true;
      });
    }
    if (o.healthy && o.disable === null) return this.delivered.submit({ id, holder, outcome: o });
    return (await this.query(SQL.record, this.recordValues(id, holder, o), this.dispatch())).length === 1;
  }

  private async recordDelivered(items: readonly Delivered[]): Promise<Array<boolean | Promise<boolean>>> {
    let rows: Row[];
    try {
      rows = await this.query(
        SQL.recordDelivered,
        [
          items.map((i) => i.id),
          items.map((i) => i.holder),
          items.map((i) => i.outcome.lastStatus),
          items.map((i) => i.outcome.durationMs),
          items.map((i) => i.outcome.response),
        ],
        this.dispatch(),
      );
    } catch {
      // The statement failed as a whole (a deadlock with another instance's, on the rows of
      // webhooks recovering together, say): each on its own, so that one conflict costs one record.
      return items.map(
        async (i) =>
          (await this.query(SQL.record, this.recordValues(i.id, i.holder, i.outcome), this.dispatch())).length === 1,
      );
    }
    const recorded = new Set(rows.map((r) => big(r.id)));
    return items.map((i) => recorded.has(i.id));
  }

  private recordValues(id: bigint, holder: string, o: AttemptOutcome): unknown[] {
    const { status, lastStatus, lastError, retryInMs, healthy, disable, disableWhenFailingForMs } = o;
    return [
      ...[id, holder, status, lastStatus, lastError, retryInMs ?? 0, healthy, disable, disableWhenFailingForMs],
      ...[o.durationMs, o.response],
    ];
  }

  async releaseLeases(holder: string): Promise<void> {
    await this.query(SQL.release, [holder]);
  }

  async nextDueInMs(): Promise<number | null> {
    const wait = (await this.query(SQL.nextDue, []))[0]!.wait;
    return wait === null ? null : Number(wait);
  }
}

/**
 * LISTEN on a connection of its own (a pooled one would be handed to other queries), reconnecting
 * after a second when it drops. `listener` is also called on every (re)connect, since a NOTIFY sent
 * while disconnected is lost: the reader then catches up from the log.
 */
export class EventListener {
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly listener: () => void,
  ) {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 3000 });
    client.on('notification', () => this.listener());
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENT_CHANNEL}`);
      this.listener();
    } catch {
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    client.end().catch(() => {});
    this.retry = setTimeout(() => void this.connect(), 1000);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
