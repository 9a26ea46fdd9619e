import type pg from 'pg';
import { classifyPostgresError } from './errors.js';
import { type Row, big, queryRows } from './rows.js';
import { ANY_ACTIVE, DB_NOW_MS, PUBLISHED } from './statements.js';
import type { EventRecord, EventRow, EventType, PruneBatch, PruneCursor } from '../event-store.js';

// The event log on PostgreSQL: read by the change feed, pruned past retention (with the delivery
// records of that age). Its events are written by the statements of the changes they record
// (postgres/statements.ts, withEvents), and read no further than the event watermark (PUBLISHED).
// Every time here is the database's clock (DB_NOW_MS).

const NOW = DB_NOW_MS;

const SQL = {
  horizon: 'SELECT pruned_through FROM event_horizon',
  // Where a reader that starts from now starts: the watermark, not the newest id (one not yet
  // published may still have a smaller one committing before it).
  lastId: `SELECT ${PUBLISHED} AS id`,
  // One statement: the oldest events past retention, the horizon raised to the newest of them.
  // Read in id order below the first event still kept (found through events_created_at), so a log
  // with nothing old yet costs an index lookup, not a scan of every event in id order. Both walks
  // start after the run's cursor ($3, $4: PruneCursor): the index entries of the rows its earlier
  // batches deleted stay until a vacuum, and a walk from the oldest would pass them all, each batch.
  // Not after the horizon: an event committed or grown old behind it would stay forever.
  prune: `WITH gone AS (
      DELETE FROM events WHERE id IN (SELECT id FROM events
        WHERE id > $3 AND id <= ${PUBLISHED} AND id < coalesce((SELECT id FROM events WHERE created_at >= ${NOW} - $1 ORDER BY created_at LIMIT 1),
            9223372036854775807)
          AND created_at < ${NOW} - $1
          AND (id <= (SELECT fanned_through FROM delivery_cursor) OR NOT ${ANY_ACTIVE}) ORDER BY id LIMIT $2)
      RETURNING id),
    raised AS (UPDATE event_horizon SET pruned_through = greatest(pruned_through, (SELECT max(id) FROM gone))
      WHERE EXISTS (SELECT 1 FROM gone)),
    -- In created_at order, so through deliveries_created_at from the cursor (>=: rows of the same
    -- time may be left), never a scan of the table.
    old AS (DELETE FROM deliveries WHERE id IN (
      SELECT id FROM deliveries WHERE created_at >= $4 AND created_at < ${NOW} - $1 AND status != 'pending'
      ORDER BY created_at LIMIT $2)
      RETURNING id, created_at),
    -- Their attempt log goes with them (no foreign key: a check per attempt recorded would cost more).
    old_attempts AS (DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM old))
    SELECT (SELECT count(*) FROM gone) + (SELECT count(*) FROM old) AS n,
      (SELECT max(id) FROM gone) AS event_id, (SELECT max(created_at) FROM old) AS delivery_at`,
} as const;

/**
 * A read of the log, of `columns` in id order up to the watermark, and its values: every owner's
 * events or one's, of every type or of `types` (?types=: the range on id, or on (owner, id), stays
 * the index's, the type a filter).
 */
function logRead(
  columns: string,
  after: bigint,
  owner: string | null,
  limit: number,
  types: readonly EventType[] | null,
): [string, unknown[]] {
  const values: unknown[] = [after, limit];
  let where = `id > $1 AND id <= ${PUBLISHED}`;
  if (owner !== null) where += ` AND owner = $${values.push(owner)}`;
  if (types !== null) where += ` AND type = ANY($${values.push(types)}::text[])`;
  return [`SELECT ${columns} FROM events WHERE ${where} ORDER BY events.id LIMIT $2`, values];
}

export class PostgresEventLog {
  constructor(private readonly pool: pg.Pool) {}

  private query(text: string, values: unknown[]): Promise<Row[]> {
    return queryRows(this.pool, text, values);
  }

  /** A read: sent again across a failover whatever became of the first try. */
  private read(text: string, values: unknown[]): Promise<Row[]> {
    return queryRows(this.pool, text, values, true);
  }

  async readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null,
  ): Promise<EventRecord[]> {
    const rows = await this.read(...logRead('id, type, owner, payload, created_at', after, owner, limit, types));
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
    return big((await this.read(SQL.horizon, []))[0]!.pruned_through);
  }

  async lastEventId(): Promise<bigint> {
    return big((await this.read(SQL.lastId, []))[0]!.id);
  }

  async prune(retentionMs: number, batch: number, after: PruneCursor): Promise<PruneBatch> {
    const [r] = await this.query(SQL.prune, [retentionMs, batch, after.eventId, after.deliveryCreatedAt]);
    return {
      rows: Number(r!.n),
      next: {
        eventId: r!.event_id === null ? after.eventId : big(r!.event_id),
        deliveryCreatedAt: r!.delivery_at === null ? after.deliveryCreatedAt : Number(r!.delivery_at),
      },
    };
  }
}
