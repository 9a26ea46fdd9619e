import { type RecoverOptions, RecoverStoppedError, type Recovered } from './webhook-store.js';

// A webhook's recover (WebhookStore.recoverDeliveries) in parts, the same on both engines: each
// engine gives the steps, each a transaction of its own that examines at most `rows` rows, and
// this walks them. No statement grows with the webhook's deliveries or the log's events, so a
// recover of any size stays inside a statement deadline and, on SQLite, holds the one connection
// (and the event loop) for one part at a time; the whole is linear in what it examines.
//
// 1. start: every event so far fanned out (as an enable does), the webhook checked, and read once:
//    its subject, types and birth, the cursor (`through`: the events after it are the fan-out's to
//    deliver), and its newest delivery (`lastDelivery`).
// 2. requeue: the webhook's deliveries up to `lastDelivery`, in id order (deliveries_webhook,
//    webhook_id and id), `rows` at a time: the failed ones created at or after `since` pending
//    again. Each part also answers the event ids of the deliveries it examined.
// 3. missed: the events through the cursor the webhook may see (its owner's through
//    events_owner_id, or every event by id for an all-plants webhook), `rows` at a time: those of
//    its types since `since` and its birth with no delivery to it get one, in event order.
//
// "No delivery to it" is asked of the event ids step 2 gathered, not of the deliveries table: no
// index leads with (webhook_id, event_id), so a NOT EXISTS per part would read every delivery of the
// webhook again each part (quadratic in them). The ids are held as a sorted Float64Array, 8 bytes a
// delivery (8 MB for a million) for the length of the recover, and looked up by binary search;
// event ids stay below 2^53 (the timeline bases of migration 9), exact as numbers.
//
// The deliveries of events through the cursor made after step 1 are made by recovers alone (the
// fan-out makes those after the cursor), and every part of step 3 makes them holding the webhook's
// recover lock (PostgreSQL's advisory lock; SQLite's one writer), as step 1 reads `lastDelivery`
// holding it. So under that lock, the webhook's deliveries past the newest one the previous part
// saw (`watermark`) are all there is beside step 2's ids: each part reads those first (a range of
// deliveries_webhook, nearly always empty), and two recovers of one webhook at once never make a
// delivery twice.

/** A webhook as a recover's first transaction read it. */
export interface RecoverTarget {
  readonly owner: string;
  readonly allPlants: boolean;
  /** Its event types, space-separated, as stored. */
  readonly events: string;
  /** The first event time it is owed: the later of `since` and its birth. */
  readonly from: number;
  /** The delivery cursor then: every event through it was fanned out. */
  readonly through: bigint;
  /** Its newest delivery then (0 when none). */
  readonly lastDelivery: bigint;
}

export interface RequeuePart {
  /** Deliveries examined: fewer than asked when the walk is over. */
  readonly examined: number;
  /** The last delivery id examined (where the next part starts). */
  readonly last: bigint;
  readonly requeued: number;
  /** The event ids (1 through `through`) of the deliveries examined. */
  readonly eventIds: readonly number[];
}

export interface MissedPart {
  /** Events examined: fewer than asked when the walk is over. */
  readonly examined: number;
  /** The last event id examined. */
  readonly last: bigint;
  readonly created: number;
  /** The webhook's newest delivery once this part's are made. */
  readonly watermark: bigint;
}

/**
 * Inside a part of step 3, holding the recover lock: `fresh`, the event ids (through the cursor) of
 * the webhook's deliveries past the watermark; `wanted`, the events of the part it is owed, in
 * ascending order. Answers those to make a delivery for, in the same order.
 */
export type ChooseMissed = (fresh: readonly number[], wanted: readonly number[]) => number[];

/** An engine's three steps for one recover of one webhook (the id, owner and `since` are theirs). */
export interface RecoverSteps {
  /** Undefined when there is no such webhook of the owner. */
  start(): Promise<RecoverTarget | undefined>;
  requeue(target: RecoverTarget, after: bigint, rows: number): Promise<RequeuePart>;
  /** Undefined when the webhook is gone (deleted since the start). */
  missed(
    target: RecoverTarget,
    after: bigint,
    watermark: bigint,
    rows: number,
    choose: ChooseMissed,
  ): Promise<MissedPart | undefined>;
}

/** Below every id: where both walks start. */
const BEFORE_ALL = -(2n ** 63n);

/**
 * The event ids that have a delivery to the webhook, kept sorted as they arrive: each part's ids
 * sorted, then merged into the tail they overlap. Deliveries are mostly made in event order, so a
 * part nearly always lands after the rest (a copy); one made later for older events (an earlier
 * recover's) merges into the tail above them, once. No sort of the whole on the event loop.
 */
class DeliveredEvents {
  private ids = new Float64Array(1024);
  private size = 0;
  private readonly later = new Set<number>();

  add(unsorted: readonly number[]): void {
    if (unsorted.length === 0) return;
    const part = Float64Array.from(unsorted).sort();
    if (this.size + part.length > this.ids.length) {
      const grown = new Float64Array(Math.max(this.ids.length * 2, this.size + part.length));
      grown.set(this.ids.subarray(0, this.size));
      this.ids = grown;
    }
    const ids = this.ids;
    // Merged from the back: what is above the part's first id moves up to make room.
    let i = this.size - 1;
    let j = part.length - 1;
    for (let k = this.size + part.length - 1; j >= 0; k--)
      ids[k] = i >= 0 && ids[i]! > part[j]! ? ids[i--]! : part[j--]!;
    this.size += part.length;
  }

  /** Those made since step 2 read them (a concurrent recover's). */
  addLater(ids: readonly number[]): void {
    for (const id of ids) this.later.add(id);
  }

  has(id: number): boolean {
    let low = 0;
    let high = this.size - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const at = this.ids[mid]!;
      if (at === id) return true;
      if (at < id) low = mid + 1;
      else high = mid - 1;
    }
    return this.later.has(id);
  }
}

/**
 * Runs a recover's steps. A failure of step 1 is thrown as it is (nothing was done); a later one,
 * after parts committed, as a RecoverStoppedError with their totals.
 */
export async function recoverInParts(
  steps: RecoverSteps,
  options: RecoverOptions,
  defaultRows: number,
): Promise<Recovered | undefined> {
  const rows = options.partRows ?? defaultRows;
  if (!Number.isSafeInteger(rows) || rows < 1) throw new RangeError(`partRows must be a positive integer, not ${rows}`);
  const target = await steps.start();
  if (target === undefined) return undefined;
  let requeued = 0;
  let created = 0;
  const progress = (): void => options.onProgress?.({ requeued, created });
  try {
    const delivered = new DeliveredEvents();
    for (let after = BEFORE_ALL; ;) {
      const part = await steps.requeue(target, after, rows);
      requeued += part.requeued;
      delivered.add(part.eventIds);
      progress();
      if (part.examined < rows) break;
      after = part.last;
    }
    const choose: ChooseMissed = (fresh, wanted) => {
      delivered.addLater(fresh);
      return wanted.filter((id) => !delivered.has(id));
    };
    let watermark = target.lastDelivery;
    for (let after = BEFORE_ALL; ;) {
      const part = await steps.missed(target, after, watermark, rows, choose);
      if (part === undefined) return undefined;
      created += part.created;
      watermark = part.watermark;
      progress();
      if (part.examined < rows) break;
      after = part.last;
    }
    return { requeued, created };
  } catch (error) {
    throw new RecoverStoppedError({ requeued, created }, { cause: error });
  }
}
