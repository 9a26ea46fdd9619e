import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { HttpError } from '../errors.js';

/** The event-loop delay histogram's resolution; its samples are this late at best. */
const RESOLUTION_MS = 10;

class OverloadedError extends HttpError {
  constructor() {
    super(503, 'the server is overloaded; retry shortly', { 'retry-after': '1' });
  }
}

/**
 * The event loop's lag, measured as @fastify/under-pressure measures it: the mean delay of Node's
 * sampler over each interval, less its resolution. It replaces that plugin, whose hook cost about
 * 0.4 µs a request (BENCHMARKS.md); this one compares one number.
 */
export class EventLoopLag {
  private readonly histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private readonly timer: NodeJS.Timeout;
  /** The lag over the last interval, in ms: Infinity when the sampler never ran in it. */
  private lagMs = 0;

  constructor(sampleMs: number) {
    this.histogram.enable();
    this.timer = setInterval(
      () => {
        const mean = this.histogram.mean / 1e6 - RESOLUTION_MS;
        this.lagMs = Number.isNaN(mean) ? Infinity : Math.max(0, mean);
        this.histogram.reset();
      },
      Math.max(RESOLUTION_MS, sampleMs),
    ).unref();
  }

  /**
   * An onRequest hook: while the lag exceeds `maxMs`, a request is refused at once with 503 and
   * Retry-After, rather than queued behind work whose latency has no bound. `refused` is told of each
   * (plant_store_overload_refusals_total: the status alone does not tell this 503 from a database's).
   */
  guard(maxMs: number, refused: () => void = () => {}) {
    return (_request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      if (this.lagMs <= maxMs) return done();
      refused();
      done(new OverloadedError());
    };
  }

  stop(): void {
    clearInterval(this.timer);
    this.histogram.disable();
  }
}
