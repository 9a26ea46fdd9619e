import type { FastifyBaseLogger } from 'fastify';
import { failureFields } from '../store/store.js';
import { type EventStore, PRUNE_START } from '../store/event-store.js';

/** Rows one prune statement removes at most: short transactions that never hold writers up for long. */
const BATCH = 1000;
/** How often the log is pruned. */
const EVERY_MS = 60_000;

/**
 * Keeps events and delivery records for EVENT_RETENTION: every minute, in batches of a thousand
 * rows with a turn of the event loop between them, until nothing is older. Every process does it;
 * the batches are small, so two pruning at once only share the work.
 */
export class EventPruner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly retentionMs: number,
    private readonly log: FastifyBaseLogger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.pruneNow(), EVERY_MS);
    this.timer.unref();
    void this.pruneNow();
  }

  /** Prunes until nothing past retention is left; answers how many rows went. */
  pruneNow(): Promise<void> {
    this.running ??= this.prune().finally(() => (this.running = undefined));
    return this.running;
  }

  /**
   * One run: each batch starts after the rows the run's batches before it removed (PruneCursor),
   * the first from the oldest, so a row that commits or grows old behind the cursor goes next run.
   */
  private async prune(): Promise<void> {
    let total = 0;
    try {
      for (let after = PRUNE_START; ;) {
        const batch = await this.store.pruneEvents(this.retentionMs, BATCH, after);
        total += batch.rows;
        if (batch.rows < BATCH) break;
        after = batch.next;
        await new Promise((resolve) => setImmediate(resolve));
      }
      if (total > 0) this.log.info({ rows: total }, 'pruned events and delivery records past EVENT_RETENTION');
    } catch (error) {
      this.log.warn(failureFields(error), 'could not prune the event log; trying again in a minute');
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
