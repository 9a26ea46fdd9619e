import type pg from 'pg';
import { queryRows } from './rows.js';

// The event watermark's rounds (migration 11, advance_event_watermark): readers of the log read no
// further than the watermark, so it must follow the writes. Each instance runs a round after its
// own writes of events, again a little later while marks wait for transactions in flight, and
// every second whatever happened (an instance that died after its commit, SQL by hand). Rounds of
// several instances never wait for each other: the one under way does the work for all.

/**
 * The least time from one round's start to the next one's in this instance. A mark passes only
 * when the transactions that were in flight when it was made have ended (a commit's time, a few
 * ms with a synchronous standby), so rounds closer together would mostly find nothing to do.
 */
const ROUND_GAP_MS = 5;
/**
 * The longest gap while marks wait and rounds pass none (a transaction holds the log back): the
 * gap doubles from ROUND_GAP_MS up to it, and is ROUND_GAP_MS again once the watermark moves.
 */
const STALLED_GAP_MS = 100;
/**
 * The gap while readers wait for what was written before they asked (settled): such rounds are
 * not paced fleet-wide, so that a page of GET /events costs about a commit's time more, not the
 * rounds' cadence twice over.
 */
const READER_GAP_MS = 1;
/** The round run whatever happened, so that no write waits for another to be published. */
const SAFETY_MS = 1000;
/**
 * The longest settled() waits: past it the reader reads what is published (a transaction that
 * wrote an event and stays open, by hand, holds the watermark back; nothing the service does).
 */
const SETTLE_WAIT_MS = 1000;

/** The watermark, and the newest id handed out (NULL: none yet on this timeline's sequence). */
const TAKEN = `SELECT through, timeline_id_base() + pg_sequence_last_value('events_id_seq') AS taken
  FROM event_watermark`;

interface Waiter {
  readonly taken: bigint;
  readonly resolve: () => void;
}

export class EventPublication {
  private running = false;
  private again = false;
  private lastStart = -Infinity;
  /** When this instance last heard the watermark move (a round of any instance): the gap counts from it too. */
  private lastHeard = -Infinity;
  private gap = ROUND_GAP_MS;
  private through: string | undefined;
  /** Readers waiting for the watermark to reach what had been handed out when they asked. */
  private waiters: Waiter[] = [];
  private next: NodeJS.Timeout | undefined;
  /** When `next` fires (performance.now()). */
  private nextAt = 0;
  private safety: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly pool: pg.Pool) {}

  /** Rounds every SAFETY_MS from now on (idempotent): called when this instance first reads or writes events. */
  start(): void {
    if (this.safety !== undefined || this.closed) return;
    this.safety = setInterval(() => this.request(), SAFETY_MS);
    this.safety.unref();
  }

  /**
   * The watermark moved to `through` (a NOTIFY; undefined when unknown): a round of some instance
   * just ran, so this one's next waits a gap from now (while several instances write, their rounds
   * take turns instead of adding up), and the readers it covers are answered at once.
   */
  heard(through: bigint | undefined): void {
    this.lastHeard = performance.now();
    if (through !== undefined) this.reached(through);
  }

  /** Events were written here (committed, or perhaps not): rounds until they are published. */
  written(): void {
    this.start();
    this.request();
  }

  /**
   * Resolves once every event that had an id when it was called is published: at once when the
   * watermark is there already (one round trip), else when a round moves it there, or after
   * SETTLE_WAIT_MS.
   */
  async settled(): Promise<void> {
    this.start();
    const [row] = await queryRows(this.pool, TAKEN, [], true);
    if (row === undefined || row.taken === null || BigInt(row.through as string) >= BigInt(row.taken as string)) return;
    const taken = BigInt(row.taken as string);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => done(), SETTLE_WAIT_MS);
      const waiter: Waiter = { taken, resolve: () => done() };
      const done = (): void => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve();
      };
      this.waiters.push(waiter);
      this.request();
    });
  }

  /** Tells the readers the watermark has reached. */
  private reached(through: bigint): void {
    for (const waiter of this.waiters.filter((w) => w.taken <= through)) waiter.resolve();
  }

  /**
   * A round as soon as the gap allows; one at a time, and one more if asked meanwhile. The gap is
   * counted when the round is asked for: a round put off to the gap's end then runs, whatever was
   * heard meanwhile, so that other instances' rounds never put this one's off for good.
   */
  private request(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    const now = performance.now();
    const at =
      this.waiters.length > 0 ? this.lastStart + READER_GAP_MS : Math.max(this.lastStart, this.lastHeard) + this.gap;
    if (this.next !== undefined) {
      if (this.nextAt <= at) return; // one is already set, as soon or sooner
      clearTimeout(this.next); // a reader waits: sooner than the one set
    }
    if (at > now) {
      this.nextAt = at;
      this.next = setTimeout(() => {
        this.next = undefined;
        this.run();
      }, at - now);
      this.next.unref();
      return;
    }
    this.next = undefined;
    this.run();
  }

  private run(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.lastStart = performance.now();
    void this.round().then((waiting) => {
      this.running = false;
      if (this.again || waiting) {
        this.again = false;
        this.request();
      }
    });
  }

  /** One round; whether marks still wait (or another round was under way, which may not cover ours). */
  private async round(): Promise<boolean> {
    try {
      const { rows } = await this.pool.query<{ through: string; waiting: number | null }>({
        name: 'advanceEventWatermark',
        text: 'SELECT through, waiting FROM advance_event_watermark($1)',
        values: [this.waiters.length === 0],
      });
      const row = rows[0];
      if (row === undefined) return true; // another round was under way: it may not cover ours
      this.reached(BigInt(row.through));
      if (row.waiting === null) return true; // another round ran just before: again after the gap
      if (row.through !== this.through || row.waiting === 0) this.gap = ROUND_GAP_MS;
      else this.gap = Math.min(this.gap * 2, STALLED_GAP_MS);
      this.through = row.through;
      return row.waiting > 0 || this.waiters.length > 0;
    } catch {
      // The database is away (a failover, a restart): the next write or the safety round tries again.
      return false;
    }
  }

  close(): void {
    this.closed = true;
    for (const waiter of [...this.waiters]) waiter.resolve();
    clearInterval(this.safety);
    clearTimeout(this.next);
  }
}
