import { performance } from 'node:perf_hooks';

/** How long one look at the load covers. */
const WINDOW_MS = 100;
/**
 * The event loop's busy share above which the API is taken to be saturated. On PostgreSQL the loop
 * also waits on the database's answers, so a saturating burst keeps it 60 to 97 % busy, window to
 * window (measured, BENCHMARKS.md): 90 % missed half of such windows.
 */
const SATURATED = 0.75;
/** Once saturated, the busy share below which it ends (with the rate): a burst's dips do not end it. */
const STILL_SATURATED = 0.5;
/**
 * And the request rate above which: a loop can be that busy at a modest rate (SQLite's fsyncs
 * block it), and at 1,000 creates/s deliveries must keep up (issue 14: p99 ≤ 200 ms).
 */
const BUSY_REQUESTS_PER_SECOND = 2000;

/**
 * Whether the HTTP API is saturating this process: the event loop was busy for more than 75 % of
 * the last window **and** requests arrived in it at more than 2,000 a second. Once saturated, it
 * stays so while requests arrive that fast and the loop stays more than 50 % busy. The dispatcher
 * keeps only a trickle of deliveries in flight meanwhile, and looks for them only now and then, so
 * a burst of writes is not slowed by its own webhooks (the deliveries are committed and wait, and
 * the backlog drains at full speed once the burst ends). A loop kept busy by the dispatcher alone
 * (a backlog, no requests) is not pressure.
 */
export class ApiPressure {
  #loop = performance.eventLoopUtilization();
  #at = performance.now();
  #requests: number;
  #saturated = false;

  /** `requests`: how many API requests this process has received so far (a counter). */
  constructor(private readonly requests: () => number) {
    this.#requests = requests();
  }

  get saturated(): boolean {
    const now = performance.now();
    if (now - this.#at >= WINDOW_MS) {
      const loop = performance.eventLoopUtilization();
      const requests = this.requests();
      this.#saturated =
        performance.eventLoopUtilization(loop, this.#loop).utilization >
          (this.#saturated ? STILL_SATURATED : SATURATED) &&
        ((requests - this.#requests) * 1000) / (now - this.#at) > BUSY_REQUESTS_PER_SECOND;
      this.#loop = loop;
      this.#requests = requests;
      this.#at = now;
    }
    return this.#saturated;
  }
}
