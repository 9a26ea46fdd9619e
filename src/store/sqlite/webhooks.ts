import type Database from 'better-sqlite3';
import type { SqliteDeliveries } from './deliveries.js';
import { type DeliveryRow, type WebhookRow, toDelivery, toWebhook } from './rows.js';
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

// Webhooks on SQLite: created, listed, deleted and enabled, and their management of interface
// 1.2.0 (PATCH, secret rotation, ping, recover, the attempt log). Each method runs inside the
// caller's write transaction, or is a read.

interface AttemptRow {
  attempt: bigint;
  at: bigint;
  status: bigint | null;
  duration_ms: bigint;
  error: string | null;
  response: string | null;
}

const OWNED = '(? IS NULL OR owner = ?)';

export function prepareWebhookStatements(db: Database.Database) {
  const q = (sql: string) => db.prepare(sql).safeIntegers(true);
  return {
    countWebhooks: q('SELECT count(*) FROM webhooks WHERE owner = ?').pluck(),
    insertWebhook: q(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at, description)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    listWebhooks: q(`SELECT * FROM webhooks WHERE ${OWNED} ORDER BY created_at, id`),
    deleteWebhook: q(`DELETE FROM webhooks WHERE id = ? AND ${OWNED}`),
    deleteWebhookDeliveries: q('DELETE FROM deliveries WHERE webhook_id = ?'),
    deleteWebhookAttempts: q(
      'DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE webhook_id = ?)',
    ),
    // An active webhook stays as it is: its failure streak (failingSince) is not forgotten.
    enableWebhook: q(`UPDATE webhooks SET status = 'active', disabled_reason = NULL,
      failing_since = CASE WHEN status = 'active' THEN failing_since END
      WHERE id = ? AND ${OWNED}`),
    find: q(`SELECT * FROM webhooks WHERE id = ? AND ${OWNED}`),
    patch: q(`UPDATE webhooks SET url = coalesce(?, url), events = coalesce(?, events),
      description = coalesce(?, description) WHERE id = ?`),
    // Only an active webhook is disabled by its owner: one already disabled keeps its reason.
    disable: q(`UPDATE webhooks SET status = 'disabled', disabled_reason = ? WHERE id = ? AND status = 'active'`),
    enable: q(`UPDATE webhooks SET status = 'active', disabled_reason = NULL,
      failing_since = CASE WHEN status = 'active' THEN failing_since END WHERE id = ?`),
    // The right-hand sides read the row as it was: the current secret becomes the previous one.
    rotate: q(`UPDATE webhooks SET previous_secret = CASE WHEN :until IS NULL THEN NULL ELSE secret END,
      previous_secret_until = :until, secret = :secret WHERE id = :id AND (:owner IS NULL OR owner = :owner) RETURNING *`),
    ping: q(`INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
      VALUES (?, 0, '${PING_TYPE}', 'pending', 0, ?, ?) RETURNING *`),
    // One statement whatever the count (deliveries_webhook narrows it to this webhook's rows).
    recover: q(`UPDATE deliveries SET status = 'pending', schedule_from = attempts, next_attempt_at = ?
      WHERE webhook_id = ? AND status = 'failed' AND created_at >= ?`),
    // What a pause missed (1.3.0): the events already fanned out (through the cursor: a later one is
    // the fan-out's to make), of the webhook's subject and types, since \`since\` and the webhook's
    // birth, that have no delivery to it, made as the fan-out makes them, in event order. The
    // webhook's event ids are read once (NOT IN builds one index of them), not looked up per event.
    recoverMissed: q(`INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
      SELECT w.id, e.id, e.type, 'pending', 0, e.created_at, e.created_at FROM webhooks w JOIN events e
        ON (w.owner = e.owner OR w.all_plants = 1) AND instr(' ' || w.events || ' ', ' ' || e.type || ' ') > 0
      WHERE w.id = :id AND e.created_at >= max(:since, w.created_at)
        AND e.id <= (SELECT fanned_through FROM delivery_cursor)
        AND e.id NOT IN (SELECT event_id FROM deliveries WHERE webhook_id = :id)
      ORDER BY e.id`),
    deliveryOf: q(`SELECT d.id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.id = ? AND d.webhook_id = ? AND (? IS NULL OR w.owner = ?)`).pluck(),
    attempts: q('SELECT * FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt DESC'),
    // GET /webhooks/{id}/activity in one read: a first row (bucket -1) when the webhook is the
    // owner's, then the counts of each bucket that had attempts, from delivery_attempts_webhook_at
    // alone (a covering range: this webhook's attempts of the span, nothing else).
    countAttempts: q(`WITH w AS (SELECT id FROM webhooks WHERE id = :id AND (:owner IS NULL OR owner = :owner))
      SELECT -1, 0, 0 FROM w
      UNION ALL
      SELECT (at - :from) / :bucketMs, count(*) FILTER (WHERE status BETWEEN 200 AND 299),
        count(*) FILTER (WHERE status IS NULL OR status NOT BETWEEN 200 AND 299)
      FROM delivery_attempts WHERE webhook_id = (SELECT id FROM w) AND at >= :from AND at < :until
      GROUP BY 1`).raw(),
  };
}

type Statements = ReturnType<typeof prepareWebhookStatements>;

export class SqliteWebhooks {
  constructor(
    private readonly sql: Statements,
    private readonly deliveries: SqliteDeliveries,
    private readonly now: () => number = Date.now,
  ) {}

  create(w: NewWebhookRecord, max: number): boolean {
    if ((this.sql.countWebhooks.get(w.owner) as bigint) >= BigInt(max)) return false;
    this.deliveries.fanOut(Infinity, 'jump'); // the events so far go to the webhooks of their time, not to this one
    this.sql.insertWebhook.run(
      w.id,
      w.owner,
      w.allPlants ? 1 : 0,
      w.url,
      w.events.join(' '),
      w.status,
      w.secret,
      w.createdAt,
      w.description ?? '',
    );
    return true;
  }

  list(owner: string | null): WebhookRecord[] {
    return (this.sql.listWebhooks.all(owner, owner) as WebhookRow[]).map(toWebhook);
  }

  delete(id: string, owner: string | null): boolean {
    if (this.sql.deleteWebhook.run(id, owner, owner).changes === 0) return false;
    this.sql.deleteWebhookAttempts.run(id);
    this.sql.deleteWebhookDeliveries.run(id);
    return true;
  }

  enable(id: string, owner: string | null): boolean {
    this.deliveries.fanOut(Infinity, 'jump'); // the events of its disabled time are not owed to it
    return this.sql.enableWebhook.run(id, owner, owner).changes === 1;
  }

  private find(id: string, owner: string | null): WebhookRecord | undefined {
    const row = this.sql.find.get(id, owner, owner) as WebhookRow | undefined;
    return row === undefined ? undefined : toWebhook(row);
  }

  update(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): { webhook: WebhookRecord; disabled: boolean } | undefined {
    const before = this.find(id, owner);
    if (before === undefined) return undefined;
    // The events so far go to the webhooks of their time (docs/events.md, the delivery cursor).
    if (patch.events !== undefined || patch.status !== undefined) this.deliveries.fanOut(Infinity, 'jump');
    this.sql.patch.run(patch.url ?? null, patch.events?.join(' ') ?? null, patch.description ?? null, id);
    let disabled = false;
    if (patch.status === 'disabled') {
      disabled = this.sql.disable.run('manual' satisfies DisabledReason, id).changes === 1;
    } else if (patch.status === 'active') this.sql.enable.run(id);
    return { webhook: this.find(id, owner)!, disabled };
  }

  rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): WebhookRecord | undefined {
    const row = this.sql.rotate.get({ id, owner, secret, until: previousUntil }) as WebhookRow | undefined;
    return row === undefined ? undefined : toWebhook(row);
  }

  ping(id: string, owner: string | null): DeliveryRecord | undefined {
    if (this.find(id, owner) === undefined) return undefined;
    const now = this.now();
    return toDelivery(this.sql.ping.get(id, now, now) as DeliveryRow);
  }

  recover(id: string, owner: string | null, since: number): Recovered | undefined {
    if (this.find(id, owner) === undefined) return undefined;
    this.deliveries.fanOut(Infinity, 'jump'); // every event so far fanned out: the cursor is now
    const requeued = this.sql.recover.run(this.now(), id, since).changes;
    const created = this.sql.recoverMissed.run({ id, since }).changes;
    return { requeued, created };
  }

  countAttempts(id: string, owner: string | null, span: AttemptSpan): AttemptCounts[] | undefined {
    // Bigints: a JS number is bound as a REAL, and the bucket would be a fraction.
    const from = BigInt(span.from);
    const bucketMs = BigInt(span.bucketMs);
    const until = from + bucketMs * BigInt(span.buckets);
    const rows = this.sql.countAttempts.all({ id, owner, from, bucketMs, until }) as Array<[bigint, bigint, bigint]>;
    if (rows.length === 0) return undefined;
    return rows
      .filter(([bucket]) => bucket >= 0n)
      .map(([bucket, delivered, failed]) => ({
        bucket: Number(bucket),
        delivered: Number(delivered),
        failed: Number(failed),
      }));
  }

  attempts(webhookId: string, deliveryId: bigint, owner: string | null): AttemptRecord[] | undefined {
    if (this.sql.deliveryOf.get(deliveryId, webhookId, owner, owner) === undefined) return undefined;
    return (this.sql.attempts.all(deliveryId) as AttemptRow[]).map((r) => ({
      attempt: Number(r.attempt),
      at: Number(r.at),
      status: r.status === null ? null : Number(r.status),
      durationMs: Number(r.duration_ms),
      error: r.error,
      response: r.response,
    }));
  }
}
