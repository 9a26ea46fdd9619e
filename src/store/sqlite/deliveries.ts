import type Database from 'better-sqlite3';
import { pingPayload } from '../event-payload.js';
import type { SqliteEventLog } from './event-log.js';
import { type DeliveryRow, num, toDelivery } from './rows.js';
import {
  type AttemptOutcome,
  type AttemptRecorded,
  type ClaimedDelivery,
  type DeliveryRecord,
  type DeliveryType,
  type DisabledReason,
  PING_TYPE,
  type ClaimRequest,
  claimDefaults,
  originOf,
} from '../webhook-store.js';

// Deliveries on SQLite: made from the event log behind a cursor (fanOut), leased by the
// dispatchers, their attempts recorded, listed and retried. Every statement runs synchronously on
// the store's one connection; every write runs inside the group commit's transaction (SqliteStore),
// so none of them waits inside SQLite for another process's lock.

interface ClaimRow {
  id: bigint;
  event_id: bigint;
  type: DeliveryType;
  attempts: bigint;
  schedule_from: bigint;
  payload: string | null;
  webhook_id: string;
  owner: string;
  url: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: bigint | null;
}

/** A step of the claim's walk: a webhook with a pending delivery; owner and url null if it is gone. */
interface PendingRow {
  id: string;
  owner: string | null;
  url: string | null;
  active: bigint | null;
}

const toClaimed = (r: ClaimRow): ClaimedDelivery => ({
  id: r.id,
  eventId: r.type === PING_TYPE ? null : r.event_id,
  type: r.type,
  attempts: Number(r.attempts),
  scheduleFrom: Number(r.schedule_from),
  payload: r.type === PING_TYPE ? pingPayload(r.webhook_id) : (r.payload ?? ''),
  webhook: {
    id: r.webhook_id,
    owner: r.owner,
    url: r.url,
    secret: r.secret,
    previousSecret: r.previous_secret,
    previousSecretUntil: num(r.previous_secret_until),
  },
});

/**
 * Delivery `d` is in its plant's turn: no earlier delivery of the same plant to the same webhook is
 * pending (docs/api.md#delivery, order per plant). One probe of deliveries_plant_order; a ping's
 * plant_id is null, so it is always in turn.
 */
const IN_TURN = `NOT EXISTS (SELECT 1 FROM deliveries b INDEXED BY deliveries_plant_order
    WHERE b.webhook_id = d.webhook_id AND b.plant_id = d.plant_id AND b.event_id < d.event_id AND b.status = 'pending'
      AND b.plant_id IS NOT NULL)`;

/** `owner = ?` or, for null (an admin, an operator), every row. */
const OWNED = '(? IS NULL OR owner = ?)';

export function prepareDeliveryStatements(db: Database.Database) {
  const q = (sql: string) => db.prepare(sql).safeIntegers(true);
  return {
    cursor: q('SELECT fanned_through FROM delivery_cursor').pluck(),
    moveCursor: q('UPDATE delivery_cursor SET fanned_through = ?'),
    anyActive: q("SELECT EXISTS (SELECT 1 FROM webhooks WHERE status = 'active')").pluck(),
    // The newest of the next `limit` events after the cursor.
    fanOutEnd: q('SELECT max(id) FROM (SELECT id FROM events WHERE id > ? ORDER BY id LIMIT ?)').pluck(),
    // For each event of (from, through], one delivery per active webhook that wants its type and
    // may see its owner's plants, due at the event's time (so a backlog drains oldest first).
    fanOut:
      q(`INSERT INTO deliveries (webhook_id, event_id, plant_id, type, status, attempts, next_attempt_at, created_at)
      SELECT w.id, e.id, e.plant_id, e.type, 'pending', 0, e.created_at, e.created_at FROM events e JOIN webhooks w
        ON w.status = 'active' AND (w.owner = e.owner OR w.all_plants = 1)
        AND instr(' ' || w.events || ' ', ' ' || e.type || ' ') > 0
      WHERE e.id > ? AND e.id <= ? ORDER BY e.id, w.id`),
    findWebhook: q(`SELECT id FROM webhooks WHERE id = ? AND ${OWNED}`).pluck(),
    listDeliveries: q('SELECT * FROM deliveries WHERE webhook_id = ? ORDER BY id DESC LIMIT ?'),
    // A later page (?before=): a range of deliveries_webhook (webhook_id, id), read backwards.
    listBefore: q(
      'SELECT * FROM deliveries INDEXED BY deliveries_webhook WHERE webhook_id = ? AND id < ? ORDER BY id DESC LIMIT ?',
    ),
    // The lease stays: a delivery in flight is not put in flight a second time. Its attempt's
    // record then keeps the retry (retry_asked_at) instead of its own outcome.
    retryDelivery: q(`UPDATE deliveries SET status = 'pending', next_attempt_at = :now,
      retry_asked_at = CASE WHEN lease_owner IS NOT NULL AND lease_until >= :now THEN :now END
      WHERE id = :id AND webhook_id = :webhook`),
    // The claim's turn: the next webhooks after :after (in id order) that have a pending delivery,
    // found by a seek of deliveries_due_by_webhook each (a skip-scan: one step a webhook, whatever
    // its backlog), at most :steps of them, in order; their rows, active or not (owner null: the
    // webhook is gone). The claim goes on from the last. Webhooks with nothing pending cost nothing.
    pendingWebhooks: q(`WITH RECURSIVE walk(step, id) AS (
        SELECT 1, (SELECT webhook_id FROM deliveries INDEXED BY deliveries_due_by_webhook
          WHERE status = 'pending' AND webhook_id > :after ORDER BY webhook_id LIMIT 1)
        UNION ALL
        SELECT step + 1, (SELECT webhook_id FROM deliveries INDEXED BY deliveries_due_by_webhook
          WHERE status = 'pending' AND webhook_id > walk.id ORDER BY webhook_id LIMIT 1)
        FROM walk WHERE walk.id IS NOT NULL LIMIT :steps)
      SELECT walk.id, w.owner, w.url, w.status = 'active' AS active FROM walk LEFT JOIN webhooks w ON w.id = walk.id
      WHERE walk.id IS NOT NULL ORDER BY step`),
    // Pings are sent whatever the webhook's status: those of disabled webhooks, through deliveries_due_pings.
    duePingsOfDisabled: q(`SELECT d.id FROM deliveries d INDEXED BY deliveries_due_pings
      WHERE d.status = 'pending' AND d.type = '${PING_TYPE}' AND d.next_attempt_at <= ?
        AND (d.lease_until IS NULL OR d.lease_until < ?)
        AND (SELECT status FROM webhooks w WHERE w.id = d.webhook_id) = 'disabled'
      ORDER BY d.next_attempt_at, d.id LIMIT ?`).pluck(),
    nextPingOfDisabled: q(`SELECT min(d.next_attempt_at) FROM deliveries d INDEXED BY deliveries_due_pings
      WHERE d.status = 'pending' AND d.type = '${PING_TYPE}' AND (d.lease_until IS NULL OR d.lease_until < ?)
        AND (SELECT status FROM webhooks w WHERE w.id = d.webhook_id) = 'disabled'`).pluck(),
    // One webhook's earliest due deliveries that no one holds, through deliveries_due_by_webhook:
    // a claim costs the same whatever the backlog.
    dueOf: q(`SELECT id FROM deliveries d INDEXED BY deliveries_due_by_webhook
      WHERE webhook_id = ? AND status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)
        AND ${IN_TURN}
      ORDER BY next_attempt_at, id LIMIT ?`).pluck(),
    lease: q('UPDATE deliveries SET lease_until = ?, lease_owner = ? WHERE id = ?'),
    claimed: q(`SELECT d.id, d.event_id, d.type, d.attempts, d.schedule_from, e.payload, w.id AS webhook_id, w.owner,
        w.url, w.secret, w.previous_secret, w.previous_secret_until
      FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id LEFT JOIN events e ON e.id = d.event_id
      WHERE d.id = ?`),
    // A retry asked for while the attempt was out wins over its outcome: pending, due when asked.
    record: q(`UPDATE deliveries SET status = CASE WHEN retry_asked_at IS NULL THEN ? ELSE 'pending' END,
      attempts = attempts + 1, last_status = ?, last_error = ?, next_attempt_at = coalesce(retry_asked_at, ?),
      retry_asked_at = NULL, lease_until = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ?
      RETURNING attempts, webhook_id`).raw(),
    logAttempt:
      q(`INSERT INTO delivery_attempts (delivery_id, webhook_id, attempt, at, status, duration_ms, error, response)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
    healthy: q('UPDATE webhooks SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL'),
    failingSince: q("SELECT failing_since FROM webhooks WHERE id = ? AND status = 'active'").pluck(),
    failing: q('UPDATE webhooks SET failing_since = coalesce(failing_since, ?) WHERE id = ?'),
    disable: q("UPDATE webhooks SET status = 'disabled', disabled_reason = ? WHERE id = ? AND status = 'active'"),
    disableIfFailing: q(`UPDATE webhooks SET status = 'disabled', disabled_reason = ?
      WHERE id = ? AND status = 'active' AND failing_since <= ?`),
    release: q('UPDATE deliveries SET lease_until = NULL, lease_owner = NULL WHERE lease_owner = ?'),
    // The earliest pending delivery of an active webhook that no one holds: each webhook's first
    // such row in deliveries_due_by_webhook (one index every create keeps up to date, not two).
    nextDue: q(`SELECT min((SELECT d.next_attempt_at FROM deliveries d INDEXED BY deliveries_due_by_webhook
        WHERE d.webhook_id = w.id AND d.status = 'pending' AND (d.lease_until IS NULL OR d.lease_until < ?)
          AND ${IN_TURN}
        ORDER BY d.next_attempt_at, d.id LIMIT 1)) FROM webhooks w WHERE w.status = 'active'`).pluck(),
  };
}

type Statements = ReturnType<typeof prepareDeliveryStatements>;

/** Deliveries over one SQLite connection; `now` is this machine's clock. */
export class SqliteDeliveries {
  constructor(
    private readonly sql: Statements,
    private readonly log: SqliteEventLog,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Inside the caller's write transaction: makes the deliveries of up to `limit` events after the
   * cursor (all of them for Infinity), with the webhooks active now, and moves the cursor past
   * them. With no active webhook nothing is owed: `idle` 'jump' moves the cursor to the newest
   * event (before a webhook's set changes), 'skip' leaves it, without writing (the dispatcher's looks).
   */
  fanOut(limit: number, idle: 'jump' | 'skip'): void {
    const from = this.sql.cursor.get() as bigint;
    const newest = this.log.lastEventId();
    if (newest <= from) return;
    if (this.sql.anyActive.get() === 0n) {
      if (idle === 'jump') this.sql.moveCursor.run(newest);
      return;
    }
    const through = limit === Infinity ? newest : (this.sql.fanOutEnd.get(from, limit) as bigint | null);
    if (through === null) return;
    this.sql.fanOut.run(from, through);
    this.sql.moveCursor.run(through);
  }

  /** In a write transaction: the deliveries of every event so far are listed, none still owed. */
  listDeliveries(webhookId: string, owner: string | null, limit: number): DeliveryRecord[] | undefined {
    if (this.sql.findWebhook.get(webhookId, owner, owner) === undefined) return undefined;
    this.fanOut(Infinity, 'skip');
    return (this.sql.listDeliveries.all(webhookId, limit) as DeliveryRow[]).map(toDelivery);
  }

  /**
   * A read: a page after the first needs no fan-out, as a delivery made now has an id above every
   * one listed so far (AUTOINCREMENT), so none can join the pages below `before`.
   */
  listBefore(webhookId: string, owner: string | null, limit: number, before: bigint): DeliveryRecord[] | undefined {
    if (this.sql.findWebhook.get(webhookId, owner, owner) === undefined) return undefined;
    return (this.sql.listBefore.all(webhookId, before, limit) as DeliveryRow[]).map(toDelivery);
  }

  retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): boolean {
    if (this.sql.findWebhook.get(webhookId, owner, owner) === undefined) return false;
    return this.sql.retryDelivery.run({ now: this.now(), id: deliveryId, webhook: webhookId }).changes === 1;
  }

  claim(request: ClaimRequest): ClaimedDelivery[] {
    const { holder, leaseMs, limit, perWebhook, busy, fanOut, subjects } = claimDefaults(request);
    this.fanOut(fanOut, 'skip');
    const now = this.now();
    const claimed: ClaimedDelivery[] = [];
    const lease = (id: bigint): void => {
      this.sql.lease.run(now + leaseMs, holder, id);
      claimed.push(toClaimed(this.sql.claimed.get(id) as ClaimRow));
    };
    const { after, newcomers } = subjects;
    let newcomersLeft = newcomers?.most ?? 0;
    // A webhook the dispatcher has no count for takes its room by its receiver's origin, or is a
    // newcomer (a slow start: Newcomers). Undefined: a newcomer.
    const roomOf = (webhookId: string, url: string): number | undefined => {
      const held = busy.get(webhookId);
      if (held !== undefined || newcomers === undefined) return perWebhook - (held ?? 0);
      return newcomers.byOrigin.get(originOf(url));
    };
    const taken = new Map<string, number>(); // by subject, in this claim
    const take = (webhookId: string, owner: string, url: string): void => {
      const held = (subjects.busy.get(owner) ?? 0) + (taken.get(owner) ?? 0);
      const own = roomOf(webhookId, url);
      const newcomer = own === undefined;
      const room = Math.min(
        newcomer ? (newcomersLeft > 0 ? newcomers!.room : 0) : own,
        subjects.perSubject - held,
        limit - claimed.length,
      );
      if (room <= 0) return;
      const due = this.sql.dueOf.all(webhookId, now, now, room) as bigint[];
      for (const id of due) lease(id);
      taken.set(owner, (taken.get(owner) ?? 0) + due.length);
      if (newcomer && due.length > 0) newcomersLeft -= 1;
    };
    // The active webhooks in id order, from the one after `from` up to `until` (to the last for
    // null), those with nothing pending passed over by the walk (pendingWebhooks), a batch of steps
    // at a time, until `limit` is leased: a claim costs the same whatever the number of webhooks
    // with nothing to send. Reading every active webhook and probing each one with room would cost a
    // claim tens of milliseconds at 10,000 webhooks, and hundreds when a few dozen have something due.
    const walk = (from: string, until: string | null): void => {
      for (let cursor = from; ;) {
        const steps = Math.min(1024, Math.max(64, 2 * (limit - claimed.length)));
        const rows = this.sql.pendingWebhooks.all({ after: cursor, steps }) as PendingRow[];
        for (const { id, owner, url, active } of rows) {
          if (until !== null && id > until) return;
          if (active === 1n) take(id, owner!, url!);
          if (claimed.length >= limit) return;
        }
        if (rows.length < steps) return;
        cursor = rows.at(-1)!.id;
      }
    };
    // Round robin from the webhook after the last claim's, wrapping round once, so that no webhook's
    // id puts it first at every claim: walked from the first id each time, 8 hanging webhooks took
    // all 256 slots.
    walk(after ?? '', null);
    if (after !== undefined && claimed.length < limit) walk('', after);
    if (claimed.length < limit) {
      for (const id of this.sql.duePingsOfDisabled.all(now, now, limit - claimed.length) as bigint[]) lease(id);
    }
    return claimed;
  }

  recordAttempt(id: bigint, holder: string, o: AttemptOutcome): AttemptRecorded {
    const now = this.now();
    const next = o.status === 'pending' ? now + (o.retryInMs ?? 0) : null;
    const recorded = this.sql.record.get(o.status, o.lastStatus, o.lastError, next, id, holder) as
      [attempt: bigint, webhookId: string] | undefined;
    if (recorded === undefined) return false;
    const [attempt, webhookId] = recorded;
    this.sql.logAttempt.run(id, webhookId, attempt, now, o.lastStatus, o.durationMs, o.lastError, o.response);
    let disabled = 0;
    if (o.healthy) this.sql.healthy.run(webhookId);
    else {
      this.sql.failing.run(now, webhookId);
      const failingSince = this.sql.failingSince.get(webhookId) as bigint | null;
      const cutoff = now - o.disableWhenFailingForMs;
      if (o.disable !== null || (failingSince !== null && failingSince <= cutoff)) {
        // The events committed while it was active are owed to it: fanned out before it stops.
        this.fanOut(Infinity, 'skip');
        disabled += this.sql.disableIfFailing.run('failing' satisfies DisabledReason, webhookId, cutoff).changes;
      }
    }
    if (o.disable !== null) disabled += this.sql.disable.run(o.disable, webhookId).changes;
    return disabled > 0 ? 'disabled' : true;
  }

  releaseLeases(holder: string): void {
    this.sql.release.run(holder);
  }

  /** 0 while events wait behind the cursor for an active webhook: fanning them out is due now. */
  nextDueInMs(): number | null {
    if ((this.sql.cursor.get() as bigint) < this.log.lastEventId() && this.sql.anyActive.get() === 1n) return 0;
    const now = this.now();
    const due = [this.sql.nextDue.get(now), this.sql.nextPingOfDisabled.get(now)] as Array<bigint | null>;
    const at = due.filter((d) => d !== null).reduce<bigint | null>((a, b) => (a === null || b < a ? b : a), null);
    return at === null ? null : Math.max(0, Number(at) - now);
  }
}
