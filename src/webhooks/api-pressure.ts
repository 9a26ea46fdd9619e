import { performance } from 'node:perf_hooks';

/** How long one look at the load covers. */
const WINDOW_MS = 100;
/**
 * The event loop's busy share above which the API is taken to be saturated. On PostgreSQL the loop
 * also waits on the database's answers, so a saturating burst keeps it 60 to 97 % busy, window to
 * window (measured, BENCHMARKS.md): 90 % missed half of such windows.
 */
const SATURATED = 0.75;
/**
 * Once saturated, the busy share below which it ends (with the rate): a burst's dips do not end it,
 * for at most MAX_DIPS windows in a row, so a steady load between the two is never held as pressure.
 */
const STILL_SATURATED = 0.5;
const MAX_DIPS = 3;
/**
 * And the request rate above which: a loop can be that busy at a modest rate (SQLite's fsyncs
 * block it), and at 1,000 creates/s deliveries must keep up (p99 ≤ 200 ms from a create's answer to
 * its delivery).
 */
const BUSY_REQUESTS_PER_SECOND = 2000;

/**
 * Whether the HTTP API is saturating this process: the event loop was busy for more than 75 % of
 * the last window **and** requests arrived in it at more than 2,000 a second. Once saturated, it
 * stays so while requests arrive that fast and the loop stays more than 50 % busy, for up to 3
 * windows in a row under 75 %. The dispatcher keeps only a trickle of deliveries in flight
 * meanwhile, and looks for them only now and then, so a burst of writes is not slowed by its own
 * webhooks (the deliveries are committed and wait, and the backlog drains at full speed once the
 * burst ends). A loop kept busy by the dispatcher alone (a backlog, no requests) is not pressure.
 */
export class ApiPressure {
  #at: number;
  #requests: number;
  #saturated = false;
  /** Windows in a row that kept pressure on between 50 and 75 % busy. */
  #dips = 0;

  /**
   * `requests`: how many API requests this process has received so far (a counter). `busySince`
   * and `now` are the event loop's busy share since the last call and a monotonic clock in ms:
   * this process's own, unless a test gives its own.
   */
  constructor(
    private readonly requests: () => number,
    private readonly busySince: () => number = loopBusySince(),
    private readonly now: () => number = () => performance.now(),
  ) {
    this.#requests = requests();
    this.#at = now();
  }

  get saturated(): boolean {
    const now = this.now();
    if (now - this.#at >= WINDOW_MS) {
      const requests = this.requests();
      const busy = this.busySince();
      const fast = ((requests - this.#requests) * 1000) / (now - this.#at) > BUSY_REQUESTS_PER_SECOND;
      const dip = this.#saturated && busy <= SATURATED && busy > STILL_SATURATED && this.#dips < MAX_DIPS;
      this.#dips = fast && dip ? this.#dips + 1 : 0;
      this.#saturated = fast && (busy > SATURATED || dip);
      this.#requests = requests;
      this.#at = now;
    }
    return this.#saturated;
  }
}

/** The event loop's busy share (0 to 1) since the last call, or since this was made. */
export function loopBusySince(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const loop = performance.eventLoopUtilization();
    const busy = performance.eventLoopUtilization(loop, last).utilization;
    last = loop;
    return busy;
  };
}
