import type pg from 'pg';
import { Batcher } from '../batcher.js';
import { inTransaction } from './transaction.js';
import { pingPayload } from '../event-payload.js';
import { type Row, big, optional, queryRows, toDelivery } from './rows.js';
import { ANY_ACTIVE, DB_NOW_MS, EVENT_ORDER_LOCK, PUBLISHED } from './statements.js';
import {
  type AttemptOutcome,
  type AttemptRecorded,
  type ClaimedDelivery,
  type DeliveryRecord,
  type DeliveryType,
  type DisabledReason,
  ORIGIN_SQL,
  PING_TYPE,
  type ClaimRequest,
  claimDefaults,
  storableText,
} from '../webhook-store.js';

// Deliveries on PostgreSQL: made from the event log behind a cursor (fanOut), leased by the
// dispatchers, their attempts recorded, listed and retried. Every time here is the database's
// clock (DB_NOW_MS): leases and retries never depend on which instance's clock is right.

const NOW = DB_NOW_MS;
/** The webhooks (with something due and room for it) one claim statement looks at, at least. */
const CLAIM_WINDOW = 128;
const OWNED = '($2::text IS NULL OR owner = $2)';

/** The deliveries of the events in `ev`: one per active webhook that wants the type and may see the owner. */
const MAKE_DELIVERIES = `INSERT INTO deliveries (webhook_id, event_id, plant_id, type, status, attempts, next_attempt_at, created_at)
    SELECT w.id, ev.id, ev.plant_id, ev.type, 'pending', 0, ev.created_at, ev.created_at FROM ev JOIN webhooks w
      ON w.status = 'active' AND (w.owner = ev.owner OR w.all_plants)
      AND position(' ' || ev.type || ' ' IN ' ' || w.events || ' ') > 0`;

/**
 * Delivery `d` is in its plant's turn: no earlier delivery of the same plant to the same webhook is
 * pending (docs/api.md#delivery, order per plant). One probe of deliveries_plant_order; a ping's
 * plant_id is null, so it is always in turn.
 */
const IN_TURN = `NOT EXISTS (SELECT 1 FROM deliveries b
    WHERE b.webhook_id = d.webhook_id AND b.plant_id = d.plant_id AND b.event_id < d.event_id AND b.status = 'pending')`;

const SQL = {
  // A dispatcher's look: the deliveries of up to $1 events after the cursor, the cursor moved past
  // them, in one statement that holds the cursor's row. Only events up to the watermark
  // (PUBLISHED), so no event can still commit behind the cursor. (Scalar subqueries, so the events
  // are an index range from the cursor, never a scan from the first.) Another instance
  // fanning out already holds the row: SKIP LOCKED leaves it the work instead of waiting. With no
  // active webhook nothing is owed and nothing is written.
  // Fewer than $1 events: the cursor moves to the watermark itself, past ids no event kept (a
  // rolled-back write's), which would otherwise stay "behind the cursor" for nextDue.
  fanOut: `WITH cur AS (SELECT fanned_through FROM delivery_cursor WHERE ${ANY_ACTIVE} FOR UPDATE SKIP LOCKED),
    pub AS (SELECT through FROM event_watermark),
    ev AS (SELECT id, type, owner, plant_id, created_at FROM events WHERE id > (SELECT fanned_through FROM cur)
      AND id <= (SELECT through FROM pub) ORDER BY id LIMIT $1),
    made AS (${MAKE_DELIVERIES}),
    moved AS (UPDATE delivery_cursor SET fanned_through = greatest(fanned_through,
        CASE WHEN (SELECT count(*) FROM ev) < $1 THEN (SELECT through FROM pub) ELSE (SELECT max(id) FROM ev) END)
      WHERE EXISTS (SELECT 1 FROM cur) AND fanned_through < (SELECT through FROM pub))
    SELECT 1`,
  // Before the set of active webhooks changes (a webhook created or enabled, one about to be
  // disabled) and before deliveries are listed: every event so far, waiting for the row if need be;
  // with no active webhook the cursor just jumps to the newest event. Run holding the event-order
  // lock exclusive (holdEvents), when every event written has committed: past the watermark too.
  fanOutAll: `WITH cur AS (SELECT fanned_through FROM delivery_cursor FOR UPDATE),
    ev AS (SELECT id, type, owner, plant_id, created_at FROM events WHERE id > (SELECT fanned_through FROM cur) AND ${ANY_ACTIVE}),
    made AS (${MAKE_DELIVERIES} RETURNING 1)
    UPDATE delivery_cursor SET fanned_through = greatest(fanned_through, (SELECT coalesce(max(id), 0) FROM events))
    -- Read first, so the row is locked and the deliveries made before it changes (a CTE no one
    -- reads would run after this UPDATE, and find its row already changed by this statement).
    WHERE EXISTS (SELECT 1 FROM cur) AND (SELECT count(*) FROM made) >= 0`,
  // Whether an attempt that failed may disable its webhook by the 5-day rule ($2 ms; a minute early,
  // so the limit cannot pass unseen before the record), so the events owed to it are fanned out first.
  mayDisable: `SELECT 1 FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
    WHERE d.id = $1 AND w.status = 'active' AND coalesce(w.failing_since, ${NOW}) <= ${NOW} - $2 + 60000`,
  // Taken before a change to the set of active webhooks, until its commit: it waits for the
  // writers of events in flight (each holds the lock shared) and no other starts meanwhile, so
  // every event is fanned out with the webhooks active when it committed.
  holdEvents: `SELECT pg_advisory_xact_lock(${EVENT_ORDER_LOCK})`,
  findWebhook: `SELECT id FROM webhooks WHERE id = $1 AND ${OWNED}`,
  listDeliveries: 'SELECT * FROM deliveries WHERE webhook_id = $1 ORDER BY id DESC LIMIT $2',
  // A later page (?before=) in one statement: the webhook's row (no row: not the owner's), joined
  // to its deliveries below $3, newest first (one row of nulls: none left). `webhook_id = $1`, not
  // `= w.id`: the planner then knows the webhook, and reads a rare one's through deliveries_webhook
  // (webhook_id, id) instead of walking the primary key back through everyone's (15 ms against
  // 0.2 ms for a webhook with 1 delivery in 1,000).
  listBefore: `SELECT d.* FROM webhooks w LEFT JOIN LATERAL (
      SELECT * FROM deliveries WHERE webhook_id = $1 AND id < $3 ORDER BY id DESC LIMIT $4) d ON true
    WHERE w.id = $1 AND ($2::text IS NULL OR w.owner = $2)`,
  // The lease stays: a delivery in flight is not put in flight a second time.
  // Its attempt's record then keeps the retry (retry_asked_at) instead of its own outcome.
  retryDelivery: `UPDATE deliveries SET status = 'pending', next_attempt_at = ${NOW},
      retry_asked_at = CASE WHEN lease_owner IS NOT NULL AND lease_until >= ${NOW} THEN ${NOW} END
    WHERE id = $1 AND webhook_id = $2 AND webhook_id IN (SELECT id FROM webhooks WHERE id = $2 AND ($3::text IS NULL OR owner = $3))
    RETURNING id`,
  // A window of the webhooks' turn: the first $12 active webhooks after $6 (up to $13 when given:
  // the wrap round to where the claim began) that have a due delivery no dispatcher holds and room
  // for one (their share, less what this dispatcher has out: $5 by webhook; a webhook $5 does not
  // name, when $9 is given, takes $9's room for its URL's origin or is a newcomer, room NULL: $10
  // deliveries, for at most $11 newcomers). Walked through webhooks_pkey and a probe of
  // deliveries_due_by_webhook each, stopping at the $12th, so a claim costs the same whatever the
  // number of webhooks with nothing to send or no room (one statement over all 10,000 webhooks of a
  // large install would read every one each claim). Then each one's earliest due deliveries (SKIP
  // LOCKED passes over rows another dispatcher is leasing right now), no more than its subject's
  // share ($7 a subject, less $8: one subject's hanging receivers must not hold every slot of a
  // process, docs/api.md#delivery), the first $4 in turn order leased. The dispatcher's store walks
  // the windows round (claim below): the answer's last rows carry the window's last webhook and its
  // size.
  claim: `WITH turns AS MATERIALIZED (
      SELECT id, owner, room, row_number() OVER (ORDER BY id) AS turn FROM (
        SELECT id, owner,
          CASE WHEN $9::jsonb IS NULL OR $5::jsonb ? id THEN $3 - coalesce(($5::jsonb ->> id)::int, 0)
            ELSE ($9::jsonb ->> ${ORIGIN_SQL('url')})::int END AS room
        FROM webhooks w
        WHERE status = 'active' AND id > $6::text AND ($13::text IS NULL OR id <= $13::text)
          AND EXISTS (SELECT 1 FROM deliveries d
            WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= ${NOW}
              AND (d.lease_until IS NULL OR d.lease_until < ${NOW}))
        ORDER BY id) r
      WHERE coalesce(room, CASE WHEN $11 > 0 THEN $10 ELSE 0 END) > 0
      LIMIT $12),
    window_end AS (SELECT max(id) AS last_id, count(*) AS size FROM turns),
    candidate AS (
      SELECT d.id, t.owner, t.turn, d.next_attempt_at, t.room IS NULL AS newcomer FROM turns t CROSS JOIN LATERAL (
        SELECT id, next_attempt_at FROM deliveries d
        WHERE webhook_id = t.id AND status = 'pending' AND next_attempt_at <= ${NOW}
          AND (lease_until IS NULL OR lease_until < ${NOW}) AND ${IN_TURN}
        ORDER BY next_attempt_at, id
        LIMIT greatest(0, least(coalesce(t.room, $10), $7 - coalesce(($8::jsonb ->> t.owner)::int, 0)))
        FOR UPDATE SKIP LOCKED) d),
    chosen AS (
      SELECT id, turn, next_attempt_at, newcomer FROM (
        SELECT id, owner, turn, next_attempt_at, newcomer,
          row_number() OVER (PARTITION BY owner ORDER BY turn, next_attempt_at, id) AS nth,
          dense_rank() OVER (PARTITION BY newcomer ORDER BY turn) AS nth_newcomer
        FROM candidate) c
      WHERE nth <= $7 - coalesce(($8::jsonb ->> owner)::int, 0) AND (NOT newcomer OR nth_newcomer <= $11)
      ORDER BY turn, next_attempt_at, id
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
      LIMIT greatest(0, $4 - (SELECT count(*) FROM chosen))),
    leased AS (UPDATE deliveries SET lease_until = ${NOW} + $2, lease_owner = $1
      WHERE id IN (SELECT id FROM chosen UNION ALL SELECT id FROM pings)
      RETURNING id, event_id, type, attempts, schedule_from, webhook_id)
    SELECT l.id, l.event_id, l.type, l.attempts, l.schedule_from, e.payload, w.id AS webhook_id, w.owner, w.url,
      w.secret, w.previous_secret, w.previous_secret_until, c.newcomer, c.turn, c.next_attempt_at AS due_at,
      NULL AS last_id, NULL AS size
    FROM leased l JOIN webhooks w ON w.id = l.webhook_id LEFT JOIN events e ON e.id = l.event_id
      LEFT JOIN chosen c ON c.id = l.id
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, last_id, size
    FROM window_end
    ORDER BY last_id NULLS FIRST, turn NULLS LAST, due_at, id`,
  // The webhook's row is written only when its health changes: a row every delivery of a webhook
  // updated would make the concurrent records of its deliveries wait for each other's commits.
  record: `WITH d AS (
      UPDATE deliveries SET status = CASE WHEN retry_asked_at IS NULL THEN $3 ELSE 'pending' END,
        attempts = attempts + 1, last_status = $4, last_error = $5,
        next_attempt_at = coalesce(retry_asked_at, CASE WHEN $3 = 'pending' THEN ${NOW} + $6 END),
        retry_asked_at = NULL, lease_until = NULL, lease_owner = NULL
      WHERE id = $1 AND lease_owner = $2 RETURNING id, webhook_id, attempts),
    logged AS (INSERT INTO delivery_attempts (delivery_id, webhook_id, attempt, at, status, duration_ms, error, response)
      SELECT id, webhook_id, attempts, ${NOW}, $4, $10, $5, $11 FROM d),
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
    d AS (UPDATE deliveries SET status = CASE WHEN retry_asked_at IS NULL THEN 'delivered' ELSE 'pending' END,
        attempts = attempts + 1, last_status = input.last_status, last_error = NULL,
        next_attempt_at = retry_asked_at, retry_asked_at = NULL, lease_until = NULL, lease_owner = NULL
      FROM input WHERE deliveries.id = input.id AND deliveries.lease_owner = input.holder
      RETURNING deliveries.id, deliveries.webhook_id, deliveries.attempts, input.last_status, input.duration_ms,
        input.response),
    logged AS (INSERT INTO delivery_attempts (delivery_id, webhook_id, attempt, at, status, duration_ms, error, response)
      SELECT id, webhook_id, attempts, ${NOW}, last_status, duration_ms, NULL, response FROM d),
    w AS (UPDATE webhooks SET failing_since = NULL
      WHERE id IN (SELECT webhook_id FROM d) AND failing_since IS NOT NULL)
    SELECT id FROM d`,
  release: 'UPDATE deliveries SET lease_until = NULL, lease_owner = NULL WHERE lease_owner = $1',
  // The earliest pending delivery of an active webhook that no one holds, read in index order.
  // 0 while published events wait behind the cursor for an active webhook.
  nextDue: `SELECT CASE
      WHEN ${ANY_ACTIVE} AND (SELECT fanned_through FROM delivery_cursor) < ${PUBLISHED}
        THEN 0
      ELSE (SELECT greatest(0, d.next_attempt_at - ${NOW}) FROM deliveries d
        JOIN webhooks w ON w.id = d.webhook_id
        WHERE d.status = 'pending' AND (w.status = 'active' OR d.type = '${PING_TYPE}')
          AND (d.lease_until IS NULL OR d.lease_until < ${NOW}) AND ${IN_TURN}
        ORDER BY d.next_attempt_at LIMIT 1) END AS wait`,
} as const;

/**
 * In a transaction about to change the set of active webhooks: every event so far fanned out, and
 * no event committing until that transaction commits (the event-order lock, held to its end), so
 * every event goes to the webhooks active when it committed.
 */
export async function fanOutHoldingEvents(client: pg.PoolClient): Promise<void> {
  await client.query(SQL.holdEvents);
  await client.query(SQL.fanOutAll);
}

/** An attempt's text as a text column takes it (the sender's answer already is; an error may not be). */
const storable = (text: string | null): string | null => (text === null ? null : storableText(text));

/** A delivered attempt to record (recordDelivered). */
interface Delivered {
  readonly id: bigint;
  readonly holder: string;
  readonly outcome: AttemptOutcome;
}

/** The most delivered attempts one statement records. */
const RECORD_BATCH = 256;
/** A record not answered by then fails: the lease runs out and the delivery is sent again. */
const RECORD_WAIT_MS = 15_000;

export class PostgresDeliveries {
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

  private query(text: string, values: unknown[], pool = this.pool): Promise<Row[]> {
    return queryRows(pool, text, values);
  }

  /** A read: sent again across a failover whatever became of the first try. */
  private read(text: string, values: unknown[]): Promise<Row[]> {
    return queryRows(this.pool, text, values, true);
  }

  async listDeliveries(webhookId: string, owner: string | null, limit: number): Promise<DeliveryRecord[] | undefined> {
    if ((await this.read(SQL.findWebhook, [webhookId, owner])).length === 0) return undefined;
    await this.query(SQL.fanOutAll, [], this.dispatch()); // none still owed
    return (await this.read(SQL.listDeliveries, [webhookId, limit])).map(toDelivery);
  }

  /**
   * No fan-out first: a delivery made now takes an id from the sequence, above every id listed so
   * far, so none can join the pages below `before`.
   */
  async listBefore(
    webhookId: string,
    owner: string | null,
    limit: number,
    before: bigint,
  ): Promise<DeliveryRecord[] | undefined> {
    const rows = await this.read(SQL.listBefore, [webhookId, owner, before, limit]);
    if (rows.length === 0) return undefined;
    return rows.filter((r) => r.id !== null).map(toDelivery);
  }

  async retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean> {
    return (await this.query(SQL.retryDelivery, [deliveryId, webhookId, owner])).length === 1;
  }

  async claim(request: ClaimRequest): Promise<ClaimedDelivery[]> {
    const { holder, leaseMs, limit, perWebhook, busy, fanOut, subjects } = claimDefaults(request);
    await this.query(SQL.fanOut, [fanOut], this.dispatch());
    // The turn from the webhook after `after` to the last, then from the first to `after`, a window
    // of CLAIM_WINDOW webhooks at a time (those with something due and room), until `limit` is
    // leased or the turn is round. Each window's statement is told what the ones before it took.
    const bySubject = new Map(subjects.busy);
    const { newcomers } = subjects;
    let newcomersLeft = newcomers?.most ?? 0;
    const start = subjects.after ?? '';
    let from = start;
    let until: string | null = null;
    // The same for every window: made once.
    const busyJson = JSON.stringify(Object.fromEntries(busy));
    const byOriginJson = newcomers === undefined ? null : JSON.stringify(Object.fromEntries(newcomers.byOrigin));
    const perSubject = Math.min(subjects.perSubject, 2 ** 31 - 1);
    const rows: Array<Record<string, unknown>> = [];
    while (rows.length < limit) {
      const window = Math.max(CLAIM_WINDOW, 2 * (limit - rows.length));
      const answer = await this.query(
        SQL.claim,
        [
          ...[holder, leaseMs, perWebhook, limit - rows.length, busyJson],
          ...[from, perSubject, JSON.stringify(Object.fromEntries(bySubject))],
          ...[byOriginJson, newcomers?.room ?? 0, newcomersLeft],
          ...[window, until],
        ],
        this.dispatch(),
      );
      const end = answer.pop()!; // the window's last webhook and size
      const seen = new Set<string>();
      for (const r of answer) {
        rows.push(r);
        const owner = r.owner as string;
        bySubject.set(owner, (bySubject.get(owner) ?? 0) + 1);
        if (r.newcomer === true && !seen.has(r.webhook_id as string)) newcomersLeft -= 1;
        seen.add(r.webhook_id as string);
      }
      if (Number(end.size) === window) from = end.last_id as string;
      else if (until === null && start !== '') [from, until] = ['', start];
      else break;
    }
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
          items.map((i) => storable(i.outcome.response)),
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
      ...[
        id,
        holder,
        status,
        lastStatus,
        storable(lastError),
        retryInMs ?? 0,
        healthy,
        disable,
        disableWhenFailingForMs,
      ],
      ...[o.durationMs, storable(o.response)],
    ];
  }

  async releaseLeases(holder: string): Promise<void> {
    await this.query(SQL.release, [holder]);
  }

  async nextDueInMs(): Promise<number | null> {
    const wait = (await this.read(SQL.nextDue, []))[0]!.wait;
    return wait === null ? null : Number(wait);
  }
}
