/** A rejected promise for whatever was thrown (an Error, as the lint and every handler expect). */
export const failed = (error: unknown): Promise<never> =>
  Promise.reject(error instanceof Error ? error : new Error(String(error)));

interface Waiting<I, O> {
  readonly item: I;
  readonly resolve: (value: O | PromiseLike<O>) => void;
  readonly reject: (error: unknown) => void;
}

interface Entry<I, O> extends Waiting<I, O> {
  /** performance.now() by which the item is answered, or fails with tooLate(). */
  readonly deadline: number;
}

/** A batch whose work has not ended; its first `expired` items have failed at their deadlines. */
interface Sent<I, O> {
  readonly entries: ReadonlyArray<Entry<I, O>>;
  expired: number;
}

/**
 * Work that waits for a database connection goes in batches. While fewer than `slots` batches run,
 * an item starts at once, alone: no delay when there is no load. Once every slot is busy, items
 * wait, and when a slot frees, everything that waited (up to `maxBatch`) runs as one batch.
 *
 * Every item of a batch arrived before the batch started, so what the batch reads or writes is at
 * least as new as each item's arrival: batching never answers from an older snapshot than a
 * request of its own would have.
 *
 * Each item has a deadline, `maxWaitMs` after it arrived, that holds whether it still waits for a
 * slot or its batch was sent: one timer is armed for the earliest deadline of the items
 * not yet answered, and re-armed for the next one when it fires, so the Nth waiter fails at its
 * own deadline, not at a check scheduled for the first.
 */
export class Batcher<I, O> {
  /** Items waiting for a slot, in arrival order (so in deadline order). */
  private waiting: Array<Entry<I, O>> = [];
  /** The batches whose work runs; each one's entries are in arrival order. */
  private readonly sent = new Set<Sent<I, O>>();
  /** Armed while an item is unanswered: for the earliest deadline, or an earlier one. */
  private timer: NodeJS.Timeout | undefined;

  /**
   * `work` answers one output per item, in order: a value, or a settled promise when items of one
   * batch may fail apart. If `work` itself fails, every item of the batch fails with it.
   * An item not answered `maxWaitMs` after it arrived fails with `tooLate(sent)`, so that when the
   * database stops answering the queue fails fast rather than grows. `sent` says the item's batch
   * was sent: its outcome is then unknown (the work goes on and may still store it; what it answers
   * later is dropped), and the batch keeps its slot until its work ends.
   */
  constructor(
    private readonly slots: number,
    private readonly maxBatch: number,
    private readonly work: (items: readonly I[]) => Promise<ReadonlyArray<O | PromiseLike<O>>>,
    private readonly maxWaitMs: number,
    private readonly tooLate: (sent: boolean) => Error,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, deadline: performance.now() + this.maxWaitMs, resolve, reject });
      this.start();
    });
  }

  private start(): void {
    const now = performance.now();
    this.expire(now);
    while (this.sent.size < this.slots && this.waiting.length > 0) this.send(this.waiting.splice(0, this.maxBatch));
    this.arm(now);
  }

  private send(entries: Array<Entry<I, O>>): void {
    const batch: Sent<I, O> = { entries, expired: 0 };
    this.sent.add(batch);
    let done: Promise<ReadonlyArray<O | PromiseLike<O>>>;
    try {
      done = this.work(entries.map((w) => w.item));
    } catch (error) {
      done = failed(error);
    }
    void done
      .then(
        (outputs) =>
          entries.forEach((w, i) => {
            if (i >= batch.expired) w.resolve(outputs[i]!);
            // Already answered: a failure that comes now has no one to go to, and must not be an unhandled rejection.
            else void Promise.resolve(outputs[i]).catch(() => {});
          }),
        (error: unknown) => entries.slice(batch.expired).forEach((w) => w.reject(error)),
      )
      .finally(() => {
        this.sent.delete(batch);
        this.start();
      });
  }

  /** Fails every item whose deadline has come, sent or waiting: deadlines follow arrival order. */
  private expire(now: number): void {
    for (const batch of this.sent) {
      const { entries } = batch;
      while (batch.expired < entries.length && entries[batch.expired]!.deadline <= now) {
        entries[batch.expired++]!.reject(this.tooLate(true));
      }
    }
    let late = 0;
    while (late < this.waiting.length && this.waiting[late]!.deadline <= now) late++;
    if (late > 0) for (const w of this.waiting.splice(0, late)) w.reject(this.tooLate(false));
  }

  /**
   * Arms the timer for the earliest deadline of the items not answered, or clears it when there is
   * none. A later item's deadline is later, so a timer already armed is never late for it; when it
   * fires, it arms the next one.
   */
  private arm(now: number): void {
    let next = this.waiting[0]?.deadline ?? Infinity;
    for (const { entries, expired } of this.sent) {
      if (expired < entries.length) next = Math.min(next, entries[expired]!.deadline);
    }
    if (next === Infinity) {
      clearTimeout(this.timer);
      this.timer = undefined;
    } else {
      // At least 1 ms: a timer may fire a little before performance.now() reaches its deadline.
      this.timer ??= setTimeout(
        () => {
          this.timer = undefined;
          this.start();
        },
        Math.max(1, next - now),
      );
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
