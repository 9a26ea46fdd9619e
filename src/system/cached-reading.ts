/** What a failed read is told: called once when reads start failing, and once when one succeeds again. */
export interface ReadingFailures {
  failed(error: unknown): void;
  recovered(): void;
}

/**
 * A value read from the database for the metrics, at most once per `everyMs` of `clock`, however
 * many scrapes come and from however many scrapers: the read starts when a scrape finds the value
 * older than that, later scrapes share it, and a scrape waits for it at most `waitMs` (then it
 * answers with the last value; the read goes on and its value serves the next scrape). A read that
 * fails keeps the last value and counts as a read (no retry before `everyMs`).
 */
export class CachedReading<T> {
  private value: T | undefined;
  private readAt = -Infinity;
  private reading: Promise<void> | undefined;
  private failing = false;

  constructor(
    private readonly read: () => Promise<T>,
    private readonly everyMs: number,
    private readonly waitMs: number,
    private readonly clock: () => number,
    private readonly failures: ReadingFailures,
  ) {}

  /** The latest value read, undefined until one read succeeded. */
  async get(): Promise<T | undefined> {
    const now = this.clock();
    // A clock that stepped back reads again rather than waiting for it to catch up.
    if (this.reading === undefined && (now - this.readAt >= this.everyMs || now < this.readAt)) {
      this.readAt = now;
      this.reading = this.refresh().finally(() => (this.reading = undefined));
    }
    if (this.reading !== undefined) await waitAtMost(this.reading, this.waitMs);
    return this.value;
  }

  private async refresh(): Promise<void> {
    try {
      this.value = await this.read();
      if (this.failing) {
        this.failing = false;
        this.failures.recovered();
      }
    } catch (error) {
      if (!this.failing) {
        this.failing = true;
        this.failures.failed(error);
      }
    }
  }
}

async function waitAtMost(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  // Not unref'd: a scrape is waiting on it, and it is cleared as soon as the work ends.
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  try {
    await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
