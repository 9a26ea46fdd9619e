import type pg from 'pg';
import { classifyPostgresError } from './errors.js';
import { DB_NOW_MS } from './statements.js';
import type { WebhookBacklog } from '../webhook-store.js';

// The metrics' read of the event side on PostgreSQL (store.ts, WebhookBacklog): one read-only
// statement, one round trip, at most once per refresh per process (system/event-series.ts). Its
// cost with a backlog of 100,000 is in docs/monitoring.md.

// The pending deliveries through the partial index deliveries_due, which holds them and nothing
// else; the events behind the cursor as a range of the primary key from the cursor, owed only
// while a webhook is active (postgres/deliveries.ts, fanOut). The LIMIT, far above any backlog, keeps
// that range one plain index scan: without it the planner, not knowing the cursor, plans a third
// of the table and starts parallel workers, 10 ms even when the cursor is at the end (0.1 ms with
// it). The oldest is the first made, read by its id; its age is on the database's clock, the one
// that stamped the rows.
const BACKLOG = `WITH p AS (SELECT count(*) AS n, min(id) AS first FROM deliveries WHERE status = 'pending'),
  b AS (SELECT count(*) AS n, min(id) AS first FROM (SELECT id FROM events
    WHERE id > (SELECT fanned_through FROM delivery_cursor) AND EXISTS (SELECT 1 FROM webhooks WHERE status = 'active')
    ORDER BY id LIMIT 1000000000) behind)
  SELECT p.n + b.n AS pending,
    ${DB_NOW_MS} - least((SELECT created_at FROM deliveries WHERE id = p.first),
      (SELECT created_at FROM events WHERE id = b.first)) AS oldest_ms,
    (SELECT count(*) FROM webhooks WHERE status = 'active') AS active,
    (SELECT count(*) FROM webhooks WHERE status = 'disabled') AS disabled
  FROM p, b`;

interface BacklogRow {
  pending: string;
  oldest_ms: string | null;
  active: string;
  disabled: string;
}

export async function readBacklog(pool: pg.Pool): Promise<WebhookBacklog> {
  let row: BacklogRow;
  try {
    row = (await pool.query<BacklogRow>(BACKLOG)).rows[0]!;
  } catch (error) {
    throw classifyPostgresError(error);
  }
  return {
    pending: Number(row.pending),
    oldestPendingMs: row.oldest_ms === null ? 0 : Math.max(0, Number(row.oldest_ms)),
    webhooks: { active: Number(row.active), disabled: Number(row.disabled) },
  };
}
