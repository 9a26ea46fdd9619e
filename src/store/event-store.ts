// The change feed's part of the storage port (interface 1.1.0): the event log, written in the same
// transaction as the change each event records.

export type EventType = 'plant.created' | 'plant.deleted';
/**
 * How many events a dispatcher's look fans out at most (claimDeliveries): a bounded write, and a
 * backlog of events is worked through in turns that leave room for the API.
 */
export const FAN_OUT_BATCH = 1000;

export const EVENT_TYPES: readonly EventType[] = ['plant.created', 'plant.deleted'];

export interface EventRecord {
  /** Orders events: a reader resuming after id N never misses an event committed later. */
  readonly id: bigint;
  readonly type: EventType;
  /** The plant's owner: who may see the event (and every plants:admin). */
  readonly owner: string;
  /** The JSON payload exactly as sent (ids beyond 2^53 as written). */
  readonly payload: string;
  readonly createdAt: number;
}

/**
 * An event as the feed's JSON pages read it (issue 23): the id as decimal text (exact, and no
 * bigint made per row), the type, the payload as stored, the time in ms. No owner: the read
 * chose by it already.
 */
export type EventRow = readonly [id: string, type: EventType, payload: string, createdAt: number];

/**
 * Where the next batch of one pruning run may start its walk: past the rows the run's batches
 * removed (issue 36: on PostgreSQL their index entries stay until a vacuum, and a walk from the
 * oldest would pass them all again). Only within a run: the next run starts from the oldest, so
 * an event that commits behind the cursor (or grows old there) is found then.
 */
export interface PruneCursor {
  /** The newest event id removed so far in the run (0 at its start). */
  readonly eventId: bigint;
  /** The newest created_at of a delivery record removed so far in the run (0 at its start). */
  readonly deliveryCreatedAt: number;
}

export const PRUNE_START: PruneCursor = { eventId: 0n, deliveryCreatedAt: 0 };

/** One batch of pruning: how many rows went (events and delivery records), and where the next may start. */
export interface PruneBatch {
  readonly rows: number;
  readonly next: PruneCursor;
}

export interface EventStore {
  /**
   * Events after `after`, in id order, of `owner`'s plants (null: every plant's), at most `limit`;
   * with `types`, only events of those types (null or left out: every type).
   */
  readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types?: readonly EventType[] | null,
  ): Promise<EventRecord[]>;
  /** What readEvents reads, as rows: what a page of JSON is written from, in bulk. */
  readEventRows(
    after: bigint,
    owner: string | null,
    limit: number,
    types?: readonly EventType[] | null,
  ): Promise<readonly EventRow[]>;
  /** The newest event id pruned so far (0 when none): resuming after an older id cannot be exact. */
  eventHorizon(): Promise<bigint>;
  /** The newest event id (0 when none). */
  lastEventId(): Promise<bigint>;
  /**
   * Deletes up to `batch` events, and up to `batch` delivery records, created more than
   * `retentionMs` ago by the store's clock, of those past `after` (the previous batch's `next` in
   * the same run; an engine may start from the oldest regardless); answers how many rows went.
   */
  pruneEvents(retentionMs: number, batch: number, after?: PruneCursor): Promise<PruneBatch>;
  /**
   * Calls `listener` whenever events may have committed (by this process, or another where the
   * engine can tell); it then reads what is new. Answers the function that stops watching.
   */
  watchEvents(listener: () => void): () => void;
}
