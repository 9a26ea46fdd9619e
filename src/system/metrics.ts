import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Brokers } from '../brokers/broker.js';
import { bearerCredential } from '../auth/authenticate.js';
import { hashToken, sameHash } from '../auth/token.js';
import { HttpError } from '../errors.js';
import type { Store } from '../store/store.js';
import type { AttemptResultKind } from '../webhooks/attempt-result.js';
import { EventSeries, type EventSeriesOptions } from './event-series.js';
import { RequestSeries } from './request-series.js';

/** How long a plant count is reused: a count walks an index, and scrapes may come often. */
const COUNT_TTL_MS = 10_000;

// Node's process metrics (memory, GC, event-loop lag) are the process's, not an app's: collected
// once per process, merged into each app's output.
let processMetrics: Registry | undefined;
function defaultMetrics(): Registry {
  if (!processMetrics) {
    processMetrics = new Registry();
    collectDefaultMetrics({ register: processMetrics, prefix: 'plant_store_' });
    // Gauges named like counters, which `promtool check metrics` flags ("non-counter metrics should
    // not have _total suffix"); each is the sum of its per-type gauge, which stays
    // (sum(plant_store_nodejs_active_handles) is the same number; docs/monitoring.md).
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) {
      processMetrics.removeSingleMetric(`plant_store_nodejs_${name}`);
    }
  }
  return processMetrics;
}

/**
 * `count()` at most once per `ttlMs`, with one call in flight at a time. Not a CachedReading
 * (cached-reading.ts), which keeps the last value through failures and stops waiting after a
 * while: a plant count that fails is unknown (NaN, docs/monitoring.md), never a stale one, and
 * the next scrape counts again.
 */
function reused(count: () => Promise<number>, ttlMs: number): () => Promise<number> {
  let last: { at: number; value: Promise<number> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= ttlMs) {
      const value = count();
      last = { at: now, value };
      value.catch(() => (last = undefined)); // a failure is not reused
    }
    return last.value;
  };
}

/**
 * Prometheus metrics of one app: every request by route and status (count and latency), the
 * plants stored, whether the database answers, and Node's process metrics. Each app has its own
 * registry, so that several apps in one process (the tests) do not share counters.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new RequestSeries([
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
  ]);

  private readonly events: EventSeries;
  private readonly overloadRefusals = new Counter({
    name: 'plant_store_overload_refusals_total',
    help: 'API requests refused with 503 by the overload guard (the event loop lagged more than MAX_EVENT_LOOP_DELAY)',
    registers: [],
  });

  constructor(
    store: Pick<Store, 'countPlants' | 'isReady' | 'webhookBacklog' | 'databaseRoute'>,
    eventSide: EventSeriesOptions,
  ) {
    const registers = [this.registry];
    this.events = new EventSeries(this.registry, store, eventSide);
    const countPlants = reused(() => store.countPlants(), COUNT_TTL_MS);
    this.registry.registerMetric(this.overloadRefusals);
    this.registry.registerMetric(
      this.requests.counter(
        'plant_store_http_requests_total',
        'HTTP requests answered, by method, route pattern and status',
      ),
    );
    this.registry.registerMetric(
      this.requests.histogram(
        'plant_store_http_request_duration_seconds',
        'Time from the request to the end of its response, by method, route pattern and status',
      ),
    );
    new Gauge({
      name: 'plant_store_plants',
      help: 'Plants stored, all owners together (read at most every 10 s from the count the database keeps)',
      registers,
      async collect() {
        try {
          this.set(await countPlants());
        } catch {
          this.set(Number.NaN); // unknown, rather than a stale or a false count: plant_store_database_up says why
        }
      },
    });
    new Gauge({
      name: 'plant_store_database_up',
      help: '1 when the database answers a query, 0 when it does not',
      registers,
      async collect() {
        this.set((await store.isReady()) ? 1 : 0);
      },
    });
    // A DATABASE_URL of more than one server (interface 1.3.0): which one is written to, and who waits.
    if (store.databaseRoute?.() !== undefined) {
      new Gauge({
        name: 'plant_store_database_host',
        help: 'The PostgreSQL server this process writes to (1, labelled host:port); none while it looks for one',
        labelNames: ['host'],
        registers,
        collect() {
          this.reset();
          const host = store.databaseRoute?.()?.host;
          if (host !== undefined) this.set({ host }, 1);
        },
      });
      new Gauge({
        name: 'plant_store_database_refused_hosts',
        help: 'PostgreSQL servers that take writes but are refused (1, labelled host:port and reason): an older timeline than this process wrote to (an old primary not rewound), or another database system',
        labelNames: ['host', 'reason'],
        registers,
        collect() {
          this.reset();
          for (const [host, { kind }] of store.databaseRoute?.()?.refused ?? []) this.set({ host, reason: kind }, 1);
        },
      });
      new Gauge({
        name: 'plant_store_database_waiting_requests',
        help: 'Requests waiting now for a PostgreSQL server to write to (a failover), at most DATABASE_FAILOVER_WAIT each',
        registers,
        collect() {
          this.set(store.databaseRoute?.()?.waiting ?? 0);
        },
      });
    }
  }

  /** plant_store_broker_up: 1 for each broker BROKERS names while its connection is up, else 0. */
  watchBrokers(brokers: Pick<Brokers, 'states'>): void {
    if (brokers.states().size === 0) return;
    new Gauge({
      name: 'plant_store_broker_up',
      help: 'Each broker BROKERS names (label broker): 1 while this process is connected to it, 0 while it reconnects',
      labelNames: ['broker'],
      registers: [this.registry],
      collect() {
        for (const [broker, state] of brokers.states()) this.set({ broker }, state === 'up' ? 1 : 0);
      },
    });
  }

  /** The text of a scrape: this app's metrics and the process's. */
  async text(): Promise<string> {
    return Registry.merge([this.registry, defaultMetrics()]).metrics();
  }

  /** Called once per webhook delivery attempt of this process (by the dispatcher). */
  observeAttempt(result: AttemptResultKind, seconds: number): void {
    this.events.observeAttempt(result, seconds);
  }

  /** Called once per request the overload guard refuses (src/http/overload.ts). */
  overloadRefused(): void {
    this.overloadRefusals.inc();
  }

  /** Called once per answered request (by the request log). */
  observe(method: string, route: string | undefined, status: number, seconds: number): void {
    // The route pattern, never the raw URL: unknown paths must not grow the label set without bound.
    this.requests.observe(method, route ?? 'unmatched', status, seconds);
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's metrics: the dispatcher that `serve` starts beside the app counts its attempts here. */
    metrics: Metrics;
  }
}

/** GET /metrics in Prometheus text format; behind `Authorization: Bearer <METRICS_TOKEN>` when that is set. */
export function metricsRoute(metrics: Metrics, token: string | null): FastifyPluginAsync {
  const expected = token === null ? null : hashToken(token);
  return async (app) => {
    app.get('/metrics', { schema: { hide: true } }, async (request: FastifyRequest, reply: FastifyReply) => {
      if (expected) {
        const given = bearerCredential(request.headers.authorization);
        if (given === undefined || !sameHash(hashToken(given), expected)) {
          throw new HttpError(401, 'the metrics need the bearer token set in METRICS_TOKEN', {
            'www-authenticate': 'Bearer realm="plant-store-metrics"',
          });
        }
      }
      const text = await metrics.text();
      return reply.type(metrics.registry.contentType).send(text);
    });
  };
}
