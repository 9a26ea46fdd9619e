/** A rejected promise for whatever was thrown (an Error, as the lint and every handler expect). */
export const failed = (error: unknown): Promise<never> =>
  Promise.reject(error instanceof Error ? error : new Error(String(error)));

interface Waiting<I, O> {
  readonly item: I;
  readonly resolve: (value: O | PromiseLike<O>) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Work that waits for a database connection goes in batches. While fewer than `slots` batches run,
 * an item starts at once, alone: no delay when there is no load. Once every slot is busy, items
 * wait, and when a slot frees, everything that waited (up to `maxBatch`) runs as one batch.
 *
 * Every item of a batch arrived before the batch started, so what the batch reads or writes is at
 * least as new as each item's arrival: batching never answers from an older snapshot than a
 * request of its own would have.
 */
export class Batcher<I, O> {
  /** With performance.now() at arrival. */
  private waiting: Array<Waiting<I, O> & { readonly since: number }> = [];
  private running = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * `work` answers one output per item, in order: a value, or a settled promise when items of one
   * batch may fail apart. If `work` itself fails, every item of the batch fails with it.
   * An item that waited `maxWaitMs` for a slot fails with `tooLate()` instead of waiting on: when
   * the database stops answering, the queue fails fast rather than growing.
   */
  constructor(
    private readonly slots: number,
    private readonly maxBatch: number,
    private readonly work: (items: readonly I[]) => Promise<ReadonlyArray<O | PromiseLike<O>>>,
    private readonly maxWaitMs: number,
    private readonly tooLate: () => Error,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, since: performance.now(), resolve, reject });
      this.start();
    });
  }

  private start(): void {
    const now = performance.now();
    while (this.waiting.length > 0 && now - this.waiting[0]!.since >= this.maxWaitMs) {
      this.waiting.shift()!.reject(this.tooLate());
    }
    if (this.running >= this.slots && this.waiting.length > 0) {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.start();
      }, this.maxWaitMs);
    }
    while (this.running < this.slots && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      this.running += 1;
      let done: Promise<ReadonlyArray<O | PromiseLike<O>>>;
      try {
        done = this.work(batch.map((w) => w.item));
      } catch (error) {
        done = failed(error);
      }
      void done
        .then(
          (outputs) => batch.forEach((w, i) => w.resolve(outputs[i]!)),
          (error: unknown) => batch.forEach((w) => w.reject(error)),
        )
        .finally(() => {
          this.running -= 1;
          this.start();
        });
    }
  }
}

/**
 * Items submitted during one turn of the event loop are handled together when it ends
 * (setImmediate): SQLite's group commit of writes, and its reads, which then share one check of
 * the database's version and go out as one burst of responses. An item is handled after it
 * arrived, never before, so it sees every write answered before it came.
 */
export class TurnBatch<I, O> {
  private waiting: Array<Waiting<I, O>> = [];

  /** `work` answers as `Batcher`'s does; it runs synchronously, once per turn. */
  constructor(private readonly work: (items: readonly I[]) => ReadonlyArray<O | PromiseLike<O>>) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      if (this.waiting.push({ item, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.waiting;
    this.waiting = [];
    let outputs: ReadonlyArray<O | PromiseLike<O>>;
    try {
      outputs = this.work(batch.map((w) => w.item));
    } catch (error) {
      for (const w of batch) w.reject(error);
      return;
    }
    batch.forEach((w, i) => w.resolve(outputs[i]!));
  }
}

interface Flight<R> {
  readonly running: Promise<R>;
  next: Promise<R> | undefined;
}

/**
 * Reads of one key share queries: at most one runs per key, and the reads that arrive while it runs
 * share the next one, started when it ends. A read never joins a query that started before it
 * arrived, so it sees every write answered before it came. Keys are independent: a slow page holds
 * up only the reads of that page.
 */
export class Coalescer<R> {
  private readonly flights = new Map<string, Flight<R>>();

  read(key: string, query: () => Promise<R>): Promise<R> {
    const flight = this.flights.get(key);
    if (!flight) return this.start(key, query);
    const again = () => this.start(key, query);
    flight.next ??= flight.running.then(again, again);
    return flight.next;
  }

  private start(key: string, query: () => Promise<R>): Promise<R> {
    let running: Promise<R>;
    try {
      running = query();
    } catch (error) {
      running = failed(error);
    }
    const flight: Flight<R> = { running, next: undefined };
    this.flights.set(key, flight);
    const landed = (): void => {
      if (flight.next === undefined) this.flights.delete(key); // else the next query replaces it
    };
    flight.running.then(landed, landed);
    return flight.running;
  }
}
