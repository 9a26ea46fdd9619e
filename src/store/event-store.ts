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
 * An event as the feed's JSON pages read it: the id as decimal text (exact, and no
 * bigint made per row), the type, the payload as stored, the time in ms. No owner: the read
 * chose by it already.
 */
export type EventRow = readonly [id: string, type: EventType, payload: string, createdAt: number];

/**
 * Where the next batch of one pruning run may start its walk: past the rows the run's batches
 * removed (on PostgreSQL their index entries stay until a vacuum, and a walk from the
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

/** What a wake of watchEvents knows of the events it announces. */
export interface EventsPublished {
  /**
   * False only when the engine knows that no webhook was active when they were published: then no
   * delivery is owed for them, and a dispatcher need not look.
   */
  readonly webhooksActive: boolean;
}

/** A wake that knows nothing of the events (an engine that cannot tell, a reconnection). */
export const ANY_PUBLISHED: EventsPublished = { webhooksActive: true };

/**
 * Every read of the log answers events in id order, and never an event while a smaller id may
 * still commit: a reader that resumed after N never misses a later-committed event with a smaller
 * id. On SQLite events commit one writer at a time, in id order. On PostgreSQL they may commit out
 * of order, and are readable once published (every smaller id committed or given up): readEvents,
 * readEventRows and lastEventId first wait until every event that had an id when they were called
 * is published (at most a second), so that what a caller wrote before is in what it reads.
 */
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
  /** The newest event id published (0 when none): where a reader that starts from now starts. */
  lastEventId(): Promise<bigint>;
  /**
   * Resolves once every event that had an id when it was called is published (or after a second
   * at most): what the fan-out of claimDeliveries reads is published events only.
   */
  eventsSettled(): Promise<void>;
  /**
   * Deletes up to `batch` events, and up to `batch` delivery records, created more than
   * `retentionMs` ago by the store's clock, of those past `after` (the previous batch's `next` in
   * the same run; an engine may start from the oldest regardless); answers how many rows went.
   */
  pruneEvents(retentionMs: number, batch: number, after?: PruneCursor): Promise<PruneBatch>;
  /**
   * Calls `listener` whenever events may have been published (by this process, or another where
   * the engine can tell); it then reads what is new. Answers the function that stops watching.
   */
  watchEvents(listener: (published: EventsPublished) => void): () => void;
}
