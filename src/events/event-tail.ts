import type { EventRecord, EventStore } from '../store/event-store.js';
import { untraced } from '../tracing-hooks.js';

/** One reader of the change feed, fed by the tail once it has caught up. */
export interface TailSubscriber {
  /** Every event of the log, in id order, once; the subscriber picks what it may see. */
  offer(event: EventRecord): void;
  heartbeat(): void;
}

/** One read's events handed to every stream, once their writes have gone out (LOG_LEVEL=debug logs it). */
export interface FanOut {
  /** The id of the last event of the read. */
  readonly last: bigint;
  readonly events: number;
  /** The streams they were offered to (each takes the ones it may see). */
  readonly streams: number;
  /** From the read's answer to the writes' end, in ms. */
  readonly ms: number;
  /** The CPU time the process used meanwhile, in ms: the fan-out's own cost, whatever else runs on the host. */
  readonly cpuMs: number;
}

/** The most events one read of the log takes. */
export const PAGE = 500;

/**
 * The change feed's one reader of the event log in this process: it reads what is new after the
 * last event it saw, whenever the store says events may have committed (here or on another
 * instance), and hands each event to every open stream. The streams are fed from the log, never
 * from what this process wrote, so they see every instance's changes; and one read serves a
 * thousand streams.
 */
export class EventTail {
  private readonly subscribers = new Set<TailSubscriber>();
  private last: bigint | undefined;
  private reading: Promise<void> | undefined;
  private again = false;
  private unwatch: (() => void) | undefined;
  private heartbeats: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly heartbeatMs: number,
    private readonly onError: (error: unknown) => void,
    /** Told of each read's fan-out: what the service itself spent on it, whatever its clients are doing. */
    private readonly onFanOut?: (fanOut: FanOut) => void,
  ) {}

  get size(): number {
    return this.subscribers.size;
  }

  /** Adds a subscriber; the tail starts with its first one and stops with its last. */
  async subscribe(subscriber: TailSubscriber): Promise<void> {
    this.subscribers.add(subscriber);
    if (this.unwatch) return;
    this.unwatch = this.store.watchEvents(() => this.wake());
    this.heartbeats = setInterval(() => {
      for (const s of this.subscribers) s.heartbeat();
    }, this.heartbeatMs);
    this.heartbeats.unref();
    // Events before this one reach a subscriber through its own catch-up read.
    this.last ??= await this.store.lastEventId();
    this.wake();
  }

  unsubscribe(subscriber: TailSubscriber): void {
    this.subscribers.delete(subscriber);
    if (this.subscribers.size > 0) return;
    this.unwatch?.();
    this.unwatch = undefined;
    clearInterval(this.heartbeats);
    this.last = undefined; // with no one listening, nothing is read; start again from the end
  }

  /** Reads what is new (one read at a time, and one more if woken meanwhile). */
  wake(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = untraced(() => this.read()).finally(() => {
      this.reading = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private async read(): Promise<void> {
    try {
      while (this.last !== undefined && this.subscribers.size > 0) {
        const events = await this.store.readEvents(this.last, null, PAGE);
        const read = performance.now();
        const cpu = this.onFanOut && process.cpuUsage();
        for (const event of events) {
          this.last = event.id;
          for (const s of this.subscribers) s.offer(event);
        }
        if (this.onFanOut !== undefined && events.length > 0) {
          const fanOut = { last: this.last, events: events.length, streams: this.subscribers.size };
          const told = this.onFanOut;
          // By the next turn of the event loop, the writes a response defers to the end of this tick are done.
          setImmediate(() => {
            const used = process.cpuUsage(cpu);
            told({ ...fanOut, ms: performance.now() - read, cpuMs: (used.user + used.system) / 1000 });
          });
        }
        if (events.length < PAGE) return;
      }
    } catch (error) {
      this.onError(error);
      // Try again shortly: the database may be back.
      setTimeout(() => this.wake(), 1000).unref();
    }
  }

  close(): void {
    for (const s of [...this.subscribers]) this.unsubscribe(s);
  }
}
