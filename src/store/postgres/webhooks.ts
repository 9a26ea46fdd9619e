import type pg from 'pg';
import { fanOutHoldingEvents } from './deliveries.js';
import { inTransaction } from './transaction.js';
import { type Row, big, queryRows, toDelivery, toWebhook } from './rows.js';
import { type MissedPart, type RecoverSteps, type RecoverTarget, recoverInParts } from '../recover.js';
import { DB_NOW_MS } from './statements.js';
import {
  type Recovered,
  type RecoverOptions,
  type AttemptCounts,
  type AttemptRecord,
  type AttemptSpan,
  type DeliveryRecord,
  type DisabledReason,
  type NewWebhookRecord,
  PING_TYPE,
  type WebhookPatch,
  type WebhookRecord,
} from '../webhook-store.js';

// Webhooks on PostgreSQL: created, listed, deleted and enabled, and their management of interface
// 1.2.0 (PATCH, secret rotation, ping, recover, the attempt log). Times are the database's clock,
// as everywhere in the PostgreSQL adapter.

const NOW = DB_NOW_MS;
const OWNED = '($2::text IS NULL OR owner = $2)';
/**
 * The first key of a recover's advisory lock (the second: a hash of the webhook's id). A two-key
 * lock: apart from the one-key locks (the event order, a subject's webhooks) whatever the hash.
 */
const RECOVER_LOCK = 7_316_003;
/**
 * The rows a part of a recover examines: a part stays far inside the statement deadline whatever
 * the webhook's size, and commits rarely enough to cost little (docs/decisions.md, "Recover in parts").
 */
const RECOVER_PART_ROWS = 10_000;

function missedPart(which: string): string {
  return `WITH w AS (SELECT id FROM webhooks WHERE id = $1 FOR KEY SHARE),
      part AS (SELECT id, type, created_at FROM events WHERE ${which} AND id > $3 AND id <= $4 ORDER BY id LIMIT $5)
    SELECT EXISTS (SELECT 1 FROM w) AS found,
      (SELECT string_agg(event_id::text, ',') FROM deliveries
        WHERE webhook_id = $1 AND id > $2 AND event_id BETWEEN 1 AND $4) AS fresh,
      (SELECT count(*) FROM part) AS examined, (SELECT max(id) FROM part) AS last,
      (SELECT string_agg(id::text, ',' ORDER BY id) FROM part
        WHERE created_at >= $6 AND position(' ' || type || ' ' IN ' ' || $7 || ' ') > 0) AS wanted`;
}

/** A list of ids from string_agg (null: none). */
const numbers = (text: unknown): number[] => (text === null ? [] : (text as string).split(',').map(Number));

const SQL = {
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
  // An active webhook stays as it is: its failure streak (failing_since) is not forgotten.
  enableWebhook: `UPDATE webhooks SET status = 'active', disabled_reason = NULL,
      failing_since = CASE WHEN status = 'active' THEN failing_since END
    WHERE id = $1 AND ${OWNED} RETURNING id`,
  lock: `SELECT status FROM webhooks WHERE id = $1 AND ${OWNED} FOR UPDATE`,
  // $6: the new status or null. Disabled by its owner only when active: one already disabled keeps
  // its reason; made active as enable does (the failure streak of a disabled one forgotten, an
  // active one's kept).
  update: `UPDATE webhooks SET url = coalesce($3, url), events = coalesce($4, events),
      description = coalesce($5, description),
      status = coalesce($6, status),
      disabled_reason = CASE WHEN $6 = 'active' THEN NULL
        WHEN $6 = 'disabled' AND status = 'active' THEN '${'manual' satisfies DisabledReason}' ELSE disabled_reason END,
      failing_since = CASE WHEN $6 = 'active' AND status <> 'active' THEN NULL ELSE failing_since END
    WHERE id = $1 AND ${OWNED} RETURNING *`,
  // The right-hand sides read the row as it was: the current secret becomes the previous one.
  rotate: `UPDATE webhooks SET previous_secret = CASE WHEN $4::bigint IS NULL THEN NULL ELSE secret END,
      previous_secret_until = $4, secret = $3
    WHERE id = $1 AND ${OWNED} RETURNING *`,
  ping: `INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
    SELECT id, 0, '${PING_TYPE}', 'pending', 0, ${NOW}, ${NOW} FROM webhooks WHERE id = $1 AND ${OWNED}
    RETURNING *`,
  // A recover in parts (store/recover.ts). Its first transaction, after the recover lock and a
  // fan-out of every event so far (none committing meanwhile, so the cursor is now): the webhook,
  // the cursor and its newest delivery (deliveries_webhook, read backwards).
  recoverLock: `SELECT pg_advisory_xact_lock(${RECOVER_LOCK}, hashtext($1))`,
  recoverStart: `SELECT w.owner, w.all_plants, w.events, w.created_at,
      (SELECT fanned_through FROM delivery_cursor) AS through,
      (SELECT coalesce(max(id), 0) FROM deliveries WHERE webhook_id = w.id) AS last_delivery
    FROM webhooks w WHERE w.id = $1 AND ${OWNED}`,
  // The next $4 deliveries of the webhook after $2 up to $3 (an index range): the failed ones
  // created since $5 pending again, tested on the row as the UPDATE finds it (a retry or another
  // recover may have changed it since the part was read); the event ids of the part through the
  // cursor ($6) beside the counts. The rows to update as an array, looked up by primary key, so
  // that the plan never depends on the statistics: as a join, statistics that count few failed
  // deliveries make the planner scan the whole table once per row of the part.
  requeuePart: `WITH part AS (SELECT id, event_id FROM deliveries
        WHERE webhook_id = $1 AND id > $2 AND id <= $3 ORDER BY id LIMIT $4),
      r AS (UPDATE deliveries SET status = 'pending', schedule_from = attempts, next_attempt_at = ${NOW}
        WHERE id = ANY (ARRAY(SELECT id FROM part)) AND status = 'failed' AND created_at >= $5 RETURNING 1)
    SELECT (SELECT count(*) FROM part) AS examined, (SELECT max(id) FROM part) AS last,
      (SELECT count(*) FROM r) AS requeued,
      (SELECT string_agg(event_id::text, ',') FROM part WHERE event_id BETWEEN 1 AND $6) AS event_ids`,
  // A part of the missed events, holding the recover lock (taken by the statement before, so this
  // one's snapshot has every delivery another recover made): whether the webhook is still there,
  // its row held (FOR KEY SHARE, as the deliveries' foreign key would) so that a delete waits for
  // this part's deliveries and takes them with it instead of failing their insert;
  // the event ids of its deliveries past the watermark $2; the next $5 events after $3 through $4
  // that it may see, and of those the ones of its types ($7) since $6. The owner's through
  // events_owner_id ($8), or every event by id (an all-plants webhook, $8 null).
  missedOwnPart: missedPart('owner = $8'),
  missedAllPart: missedPart('$8::text IS NULL'),
  // The chosen events' deliveries, made as the fan-out makes them, in event order; the new watermark.
  makeMissed: `WITH made AS (INSERT INTO deliveries (webhook_id, event_id, plant_id, type, status, attempts, next_attempt_at, created_at)
      SELECT $1, e.id, e.plant_id, e.type, 'pending', 0, e.created_at, e.created_at FROM events e
      WHERE e.id = ANY($2::bigint[]) ORDER BY e.id RETURNING id)
    SELECT (SELECT count(*) FROM made) AS created,
      greatest($3::bigint, (SELECT max(id) FROM made), (SELECT max(id) FROM deliveries WHERE webhook_id = $1)) AS watermark`,
  // No row: no such delivery of this webhook of this owner; one row of nulls: no attempt yet.
  attempts: `WITH d AS (SELECT d.id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.id = $3 AND d.webhook_id = $1 AND ($2::text IS NULL OR w.owner = $2))
    SELECT a.attempt, a.at, a.status, a.duration_ms, a.error, a.response
    FROM d LEFT JOIN delivery_attempts a ON a.delivery_id = d.id ORDER BY a.attempt DESC`,
  // GET /webhooks/{id}/activity in one statement: a first row (bucket -1) when the webhook is the
  // owner's, then the counts of each bucket that had attempts, from delivery_attempts_webhook_at
  // alone (this webhook's attempts of the span, the status included in the index).
  countAttempts: `WITH w AS (SELECT id FROM webhooks WHERE id = $1 AND ${OWNED})
    SELECT -1::bigint AS bucket, 0::bigint AS delivered, 0::bigint AS failed FROM w
    UNION ALL
    SELECT (at - $3::bigint) / $4::bigint, count(*) FILTER (WHERE status BETWEEN 200 AND 299),
      count(*) FILTER (WHERE status IS NULL OR status NOT BETWEEN 200 AND 299)
    FROM delivery_attempts WHERE webhook_id = (SELECT id FROM w) AND at >= $3 AND at < $5
    GROUP BY 1`,
} as const;

export class PostgresWebhooks {
  constructor(private readonly pool: pg.Pool) {}

  private query(text: string, values: unknown[]): Promise<Row[]> {
    return queryRows(this.pool, text, values);
  }

  /** A read: sent again across a failover whatever became of the first try. */
  private read(text: string, values: unknown[]): Promise<Row[]> {
    return queryRows(this.pool, text, values, true);
  }

  async create(w: NewWebhookRecord, max: number): Promise<boolean> {
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

  async list(owner: string | null): Promise<WebhookRecord[]> {
    return (await this.read(SQL.listWebhooks, [owner])).map(toWebhook);
  }

  async delete(id: string, owner: string | null): Promise<boolean> {
    return (await this.query(SQL.deleteWebhook, [id, owner])).length === 1;
  }

  async enable(id: string, owner: string | null): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      await fanOutHoldingEvents(client); // the events of its disabled time are not owed to it
      return (await client.query(SQL.enableWebhook, [id, owner])).rows.length === 1;
    });
  }

  async update(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): Promise<{ webhook: WebhookRecord; disabled: boolean } | undefined> {
    return inTransaction(this.pool, async (client) => {
      // The events so far go to the webhooks of their time (docs/events.md, the delivery cursor),
      // none committing until this commits: the event-order lock, as create and enable take it.
      if (patch.events !== undefined || patch.status !== undefined) await fanOutHoldingEvents(client);
      const before = (await client.query<Row>(SQL.lock, [id, owner])).rows[0];
      if (before === undefined) return undefined;
      const values = [id, owner, patch.url ?? null, patch.events?.join(' ') ?? null, patch.description ?? null];
      const row = (await client.query<Row>(SQL.update, [...values, patch.status ?? null])).rows[0]!;
      return { webhook: toWebhook(row), disabled: before.status === 'active' && row.status === 'disabled' };
    });
  }

  async rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): Promise<WebhookRecord | undefined> {
    const [row] = await this.query(SQL.rotate, [id, owner, secret, previousUntil]);
    return row === undefined ? undefined : toWebhook(row);
  }

  async ping(id: string, owner: string | null): Promise<DeliveryRecord | undefined> {
    const [row] = await this.query(SQL.ping, [id, owner]);
    return row === undefined ? undefined : toDelivery(row);
  }

  recover(id: string, owner: string | null, since: number, options: RecoverOptions): Promise<Recovered | undefined> {
    return recoverInParts(this.recoverSteps(id, owner, since), options, RECOVER_PART_ROWS);
  }

  private recoverSteps(id: string, owner: string | null, since: number): RecoverSteps {
    return {
      start: () =>
        inTransaction(this.pool, async (client): Promise<RecoverTarget | undefined> => {
          // The recover lock first, then the event order's: no part of another recover of this
          // webhook is under way while its newest delivery is read.
          await client.query(SQL.recoverLock, [id]);
          await fanOutHoldingEvents(client);
          const row = (await client.query<Row>(SQL.recoverStart, [id, owner])).rows[0];
          if (row === undefined) return undefined;
          return {
            owner: row.owner as string,
            allPlants: row.all_plants as boolean,
            events: row.events as string,
            from: Math.max(since, Number(row.created_at)),
            through: big(row.through),
            lastDelivery: big(row.last_delivery),
          };
        }),
      requeue: async (target, after, rows) => {
        const values = [id, after, target.lastDelivery, rows, since, target.through];
        const [row] = await this.query(SQL.requeuePart, values);
        return {
          examined: Number(row!.examined),
          last: row!.last === null ? after : big(row!.last),
          requeued: Number(row!.requeued),
          eventIds: numbers(row!.event_ids),
        };
      },
      missed: (target, after, watermark, rows, choose) =>
        inTransaction(this.pool, async (client): Promise<MissedPart | undefined> => {
          await client.query(SQL.recoverLock, [id]);
          const [own, scope] = target.allPlants ? [SQL.missedAllPart, null] : [SQL.missedOwnPart, target.owner];
          const values = [id, watermark, after, target.through, rows, target.from, target.events, scope];
          const part = (await client.query<Row>(own, values)).rows[0]!;
          if (part.found !== true) return undefined;
          const chosen = choose(numbers(part.fresh), numbers(part.wanted));
          const made = (await client.query<Row>(SQL.makeMissed, [id, chosen, watermark])).rows[0]!;
          return {
            examined: Number(part.examined),
            last: part.last === null ? after : big(part.last),
            created: Number(made.created),
            watermark: big(made.watermark),
          };
        }),
    };
  }

  async countAttempts(id: string, owner: string | null, span: AttemptSpan): Promise<AttemptCounts[] | undefined> {
    const until = span.from + span.bucketMs * span.buckets;
    const rows = await this.read(SQL.countAttempts, [id, owner, span.from, span.bucketMs, until]);
    if (rows.length === 0) return undefined;
    return rows
      .map((r) => ({ bucket: Number(r.bucket), delivered: Number(r.delivered), failed: Number(r.failed) }))
      .filter((c) => c.bucket >= 0);
  }

  async attempts(webhookId: string, deliveryId: bigint, owner: string | null): Promise<AttemptRecord[] | undefined> {
    const rows = await this.read(SQL.attempts, [webhookId, owner, deliveryId]);
    if (rows.length === 0) return undefined;
    return rows
      .filter((r) => r.attempt !== null)
      .map((r) => ({
        attempt: Number(r.attempt),
        at: Number(r.at),
        status: r.status === null ? null : Number(r.status),
        durationMs: Number(r.duration_ms),
        error: r.error as string | null,
        response: r.response as string | null,
      }));
  }
}
