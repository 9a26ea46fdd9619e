import type pg from 'pg';
import { fanOutHoldingEvents } from './deliveries.js';
import { inTransaction } from './transaction.js';
import { type Row, queryRows, toDelivery, toWebhook } from './rows.js';
import { DB_NOW_MS } from './statements.js';
import {
  type Recovered,
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
  // One statement whatever the count, through deliveries_webhook (this webhook's rows only).
  // Also what a pause missed (1.3.0): the events already fanned out (through the cursor: a later one
  // is the fan-out's to make, and a fan-out under way holds events past the cursor this statement
  // sees), of the webhook's subject and types, since $3 and the webhook's birth, with no delivery to
  // it, made as the fan-out makes them, in event order. NOT EXISTS, an anti-join (a hash of the
  // webhook's event ids, in batches past work_mem), not NOT IN: NOT IN is a hashed subplan only while
  // the ids fit in work_mem, and past that the list is read again for every event, quadratic (a
  // million failed deliveries: over 60 s against 28 s, bench/scale-recover-ab.ts, issue 36).
  recover: `WITH w AS (SELECT * FROM webhooks WHERE id = $1 AND ${OWNED}),
    r AS (UPDATE deliveries SET status = 'pending', schedule_from = attempts, next_attempt_at = ${NOW}
      WHERE webhook_id IN (SELECT id FROM w) AND status = 'failed' AND created_at >= $3 RETURNING 1),
    ev AS (SELECT e.id, e.type, e.owner, e.created_at FROM w JOIN events e
        ON (w.owner = e.owner OR w.all_plants) AND position(' ' || e.type || ' ' IN ' ' || w.events || ' ') > 0
      WHERE e.created_at >= greatest($3, w.created_at)
        AND e.id <= (SELECT fanned_through FROM delivery_cursor)
        AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.webhook_id = $1 AND d.event_id = e.id)
      ORDER BY e.id),
    c AS (INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
      SELECT $1, ev.id, ev.type, 'pending', 0, ev.created_at, ev.created_at FROM ev ORDER BY ev.id RETURNING 1)
    SELECT (SELECT count(*) FROM w) AS found, (SELECT count(*) FROM r) AS n, (SELECT count(*) FROM c) AS created`,
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

  async recover(id: string, owner: string | null, since: number): Promise<Recovered | undefined> {
    // Every event so far fanned out first, none committing meanwhile: the cursor is now, so the
    // pause is covered up to this moment, and what commits later is the fan-out's.
    const row = await inTransaction(this.pool, async (client) => {
      await fanOutHoldingEvents(client);
      return (await client.query<Row>(SQL.recover, [id, owner, since])).rows[0]!;
    });
    return Number(row.found) === 0 ? undefined : { requeued: Number(row.n), created: Number(row.created) };
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
