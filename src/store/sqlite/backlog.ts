import type Database from 'better-sqlite3';
import type { WebhookBacklog } from '../webhook-store.js';

// The metrics' read of the event side on SQLite (store.ts, WebhookBacklog): reads only, each
// through an index, so that even a backlog of 100,000 deliveries costs a few milliseconds of the
// (synchronous) connection, at most once per refresh (system/event-series.ts).

export function prepareBacklogStatements(db: Database.Database) {
  const q = (sql: string) => db.prepare(sql).safeIntegers(true);
  return {
    // The partial index holds every pending delivery and its id: one walk of it, never the table.
    pending: q(`SELECT count(*) AS n, min(id) AS first FROM deliveries INDEXED BY deliveries_due_by_webhook
      WHERE status = 'pending'`),
    madeAt: q('SELECT created_at FROM deliveries WHERE id = ?').pluck(),
    // Events not yet fanned out, owed only while a webhook is active (SqliteDeliveries.fanOut): a range
    // of the primary key from the cursor.
    behind: q(`SELECT count(*) AS n, min(id) AS first FROM events
      WHERE id > (SELECT fanned_through FROM delivery_cursor) AND EXISTS (SELECT 1 FROM webhooks WHERE status = 'active')`),
    eventAt: q('SELECT created_at FROM events WHERE id = ?').pluck(),
    webhooks: q('SELECT status, count(*) AS n FROM webhooks GROUP BY status'),
  };
}

type Statements = ReturnType<typeof prepareBacklogStatements>;

interface Counted {
  n: bigint;
  first: bigint | null;
}

/** `now`: the clock that stamped the rows (the event side's: this machine's). */
export function readBacklog(sql: Statements, now: number): WebhookBacklog {
  const pending = sql.pending.get() as Counted;
  const behind = sql.behind.get() as Counted;
  const made = [
    pending.first === null ? null : (sql.madeAt.get(pending.first) as bigint | undefined),
    behind.first === null ? null : (sql.eventAt.get(behind.first) as bigint | undefined),
  ].filter((at): at is bigint => typeof at === 'bigint');
  const oldest = made.length === 0 ? null : Number(made.reduce((a, b) => (b < a ? b : a)));
  const webhooks = { active: 0, disabled: 0 };
  for (const row of sql.webhooks.all() as Array<{ status: string; n: bigint }>) {
    if (row.status === 'active' || row.status === 'disabled') webhooks[row.status] = Number(row.n);
  }
  return {
    pending: Number(pending.n + behind.n),
    oldestPendingMs: oldest === null ? 0 : Math.max(0, now - oldest),
    webhooks,
  };
}
