import type Database from 'better-sqlite3';
import { knockedOut } from '../../knockouts.js';
import type { EventRecord, EventRow, EventType, PruneBatch, PruneCursor } from '../event-store.js';

// The event log on SQLite: each event written inside the transaction of the change it records,
// read by the change feed, pruned past retention (with the delivery records of that age). Every
// statement runs synchronously on the store's one connection; every write runs inside the group
// commit's transaction (SqliteStore), so none of them waits inside SQLite for another process's lock.

interface StoredEvent {
  id: bigint;
  type: EventType;
  owner: string;
  payload: string;
  created_at: bigint;
}

export function prepareLogStatements(db: Database.Database) {
  const q = (sql: string) => db.prepare(sql).safeIntegers(true);
  return {
    insertEvent: q('INSERT INTO events (type, owner, plant_id, payload, created_at) VALUES (?, ?, ?, ?, ?)'),
    // The log's reads (logReads): as EventRecords for the streams, as EventRows for the JSON pages.
    records: logReads('id, type, owner, payload, created_at', q),
    rows: logReads('CAST(id AS TEXT), type, payload, created_at', (sql) =>
      db.prepare(sql).safeIntegers(false).raw(true),
    ),
    horizon: q('SELECT pruned_through FROM event_horizon').pluck(),
    lastId: q("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)").pluck(),
    // Old events go in id order, from the oldest, while they are old: the log needs no index on
    // created_at (a create writes one index less), and a turn's pruning reads at most a batch of
    // rows, and one when the oldest is not old yet. Never past the cursor while a webhook is active:
    // an event not yet fanned out keeps its row.
    anyActive: q("SELECT EXISTS (SELECT 1 FROM webhooks WHERE status = 'active')").pluck(),
    firstEvents: q('SELECT id, created_at FROM events ORDER BY id LIMIT ?').raw(),
    firstFannedEvents: q(
      'SELECT id, created_at FROM events WHERE id <= (SELECT fanned_through FROM delivery_cursor) ORDER BY id LIMIT ?',
    ).raw(),
    pruneEvents: q('DELETE FROM events WHERE id <= ? AND created_at < ?'),
    raiseHorizon: q('UPDATE event_horizon SET pruned_through = max(pruned_through, ?)'),
    // The same rows, twice in one transaction: first their attempts, then the deliveries.
    pruneAttempts: q(`DELETE FROM delivery_attempts WHERE delivery_id IN
      (SELECT id FROM deliveries WHERE created_at < ? AND status != ? ORDER BY created_at, id LIMIT ?)`),
    pruneDeliveries: q(
      'DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE created_at < ? AND status != ? ORDER BY created_at, id LIMIT ?)',
    ),
  };
}

type Statements = ReturnType<typeof prepareLogStatements>;
type LogReads = ReturnType<typeof logReads>;

/**
 * The four reads of the log, of `columns` in id order: every owner's events or one's, of every type
 * or of those in a JSON array (?types=: the range on id stays the index's, the type a filter).
 */
function logReads(columns: string, prepare: (sql: string) => Database.Statement) {
  const read = (where: string) => prepare(`SELECT ${columns} FROM events WHERE ${where} ORDER BY events.id LIMIT ?`);
  const ofTypes = 'type IN (SELECT value FROM json_each(?))';
  return {
    all: read('id > ?'),
    owner: read('owner = ? AND id > ?'),
    allOfTypes: read(`id > ? AND ${ofTypes}`),
    ownerOfTypes: read(`owner = ? AND id > ? AND ${ofTypes}`),
  };
}

function readLog(
  reads: LogReads,
  after: bigint,
  owner: string | null,
  limit: number,
  types: readonly EventType[] | null,
): unknown[] {
  const list = types === null ? null : JSON.stringify(types);
  if (owner === null) return list === null ? reads.all.all(after, limit) : reads.allOfTypes.all(after, list, limit);
  return list === null ? reads.owner.all(owner, after, limit) : reads.ownerOfTypes.all(owner, after, list, limit);
}

/** The event log over one SQLite connection; `now` is this machine's clock. */
export class SqliteEventLog {
  readonly #off = knockedOut('event-log');

  constructor(
    private readonly sql: Statements,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Inside the caller's transaction: the event. Its deliveries are made later, behind the cursor
   * (SqliteDeliveries.fanOut), so a create costs one row whatever the webhooks.
   */
  record(type: EventType, owner: string, plantId: bigint, payload: string): void {
    if (this.#off) return; // a benchmark's knock-out (src/knockouts.ts)
    this.sql.insertEvent.run(type, owner, plantId, payload, this.now());
  }

  readEvents(after: bigint, owner: string | null, limit: number, types: readonly EventType[] | null): EventRecord[] {
    return (readLog(this.sql.records, after, owner, limit, types) as StoredEvent[]).map((r) => ({
      id: r.id,
      type: r.type,
      owner: r.owner,
      payload: r.payload,
      createdAt: Number(r.created_at),
    }));
  }

  /** Arrays straight from SQLite, the id as text: no object and no bigint made per row. */
  readEventRows(after: bigint, owner: string | null, limit: number, types: readonly EventType[] | null): EventRow[] {
    return readLog(this.sql.rows, after, owner, limit, types) as EventRow[];
  }

  eventHorizon(): bigint {
    return this.sql.horizon.get() as bigint;
  }

  lastEventId(): bigint {
    return BigInt(this.sql.lastId.get() as bigint | number);
  }

  /**
   * Ignores the cursor: SQLite deletes a row's index entries with it, so a walk from the oldest
   * reads no rows an earlier batch removed (per event flat from 1 to 10 million, BENCHMARKS.md).
   */
  prune(retentionMs: number, batch: number, after: PruneCursor): PruneBatch {
    const before = this.now() - retentionMs;
    let gone = 0;
    // Read lazily and left at the first event that is not old: one row when nothing is old yet.
    const first = this.sql.anyActive.get() ? this.sql.firstFannedEvents : this.sql.firstEvents;
    let newest: bigint | number | undefined;
    for (const [id, createdAt] of first.iterate(batch) as IterableIterator<[bigint | number, bigint | number]>) {
      if (Number(createdAt) >= before) break;
      newest = id;
    }
    if (newest !== undefined) {
      gone += this.sql.pruneEvents.run(newest, before).changes;
      this.sql.raiseHorizon.run(newest);
    }
    this.sql.pruneAttempts.run(before, 'pending', batch);
    return { rows: gone + this.sql.pruneDeliveries.run(before, 'pending', batch).changes, next: after };
  }
}
