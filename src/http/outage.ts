import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../store/store.js';

/** How often an outage checks whether the database is back. */
const PROBE_MS = 1000;

/**
 * A database outage, as an operator reads it: one line when requests start being
 * refused for it, with the reason, and one when the database answers again, with how long it was
 * away and how many requests were refused meanwhile: not a stack trace per refused request.
 */
export class DatabaseOutage {
  private since: number | undefined;
  private refusedCount = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Pick<Store, 'isReady'>,
    private readonly log: FastifyBaseLogger,
    private readonly probeMs = PROBE_MS,
  ) {}

  /** A request was refused (503) because the database is unavailable for `reason`. */
  refused(reason: string): void {
    this.refusedCount += 1;
    if (this.since !== undefined) return;
    this.since = Date.now();
    this.log.warn({ reason }, 'the database is unavailable: requests that need it get 503 until it is back');
    this.probe();
  }

  private probe(): void {
    this.timer = setTimeout(() => {
      void this.store
        .isReady()
        .catch(() => false)
        .then((ready) => {
          if (this.since === undefined) return;
          if (!ready) return this.probe();
          this.log.info({ downMs: Date.now() - this.since, refused: this.refusedCount }, 'the database is back');
          this.since = undefined;
          this.refusedCount = 0;
        });
    }, this.probeMs);
    this.timer.unref();
  }

  stop(): void {
    clearTimeout(this.timer);
  }
}
