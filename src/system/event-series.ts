import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { failureFields, type Store } from '../store/store.js';
import { type WebhookBacklog } from '../store/webhook-store.js';
import { ATTEMPT_RESULT_KINDS, type AttemptResultKind } from '../webhooks/attempt-result.js';
import { CachedReading } from './cached-reading.js';

/**
 * How often the database gauges (backlog, oldest pending, webhooks by status) are read at most,
 * per process, never once per scrape: however many scrapers there are, the database sees the same
 * few cheap reads.
 */
export const BACKLOG_EVERY_MS = 5000;
/** The longest a scrape waits for that read; past it, the last reading answers. */
const BACKLOG_WAIT_MS = 2000;
/** One attempt is at most the delivery timeout, 10 s (docs/api.md#delivery). */
const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface EventSeriesOptions {
  /** The app's clock: the database gauges are read again once it has moved BACKLOG_EVERY_MS. */
  readonly clock: () => number;
  /** Change-feed streams open in this process now. */
  readonly openStreams: () => number;
  /** Where a failing read is said, once, and its end (the app's log, once it exists). */
  readonly log: (level: 'warn' | 'info', fields: object, message: string) => void;
}

/**
 * The event side's series (interface 1.2.0; docs/api.md#health-documentation-and-metrics, and
 * docs/monitoring.md): attempts counted by the dispatcher as they end, the backlog read from the
 * database, open streams.
 */
export class EventSeries {
  private readonly attempts: Record<AttemptResultKind, Counter.Internal>;
  private readonly durations: Histogram;

  constructor(registry: Registry, store: Pick<Store, 'webhookBacklog'>, options: EventSeriesOptions) {
    const registers = [registry];
    const counter = new Counter({
      name: 'plant_store_webhook_attempts_total',
      help: 'Webhook delivery attempts made by this process, by result: delivered, http_error, network_error, refused',
      labelNames: ['result'],
      registers,
    });
    // Every result from 0, so that rate() sees the first one; bound once, so an attempt costs no label lookup.
    for (const result of ATTEMPT_RESULT_KINDS) counter.inc({ result }, 0);
    this.attempts = Object.fromEntries(ATTEMPT_RESULT_KINDS.map((kind) => [kind, counter.labels(kind)])) as Record<
      AttemptResultKind,
      Counter.Internal
    >;
    this.durations = new Histogram({
      name: 'plant_store_webhook_attempt_duration_seconds',
      help: 'How long each webhook delivery attempt of this process took, from the request to the answer',
      buckets: ATTEMPT_BUCKETS,
      registers,
    });

    const backlog = new CachedReading<WebhookBacklog>(
      () => store.webhookBacklog(),
      BACKLOG_EVERY_MS,
      BACKLOG_WAIT_MS,
      options.clock,
      {
        failed: (error) =>
          options.log(
            'warn',
            failureFields(error),
            'metrics: could not read the webhook backlog; its gauges keep their last values',
          ),
        recovered: () => options.log('info', {}, 'metrics: the webhook backlog is read again'),
      },
    );
    // Unknown (NaN) until the first read succeeds, rather than a false 0.
    const read = async (set: (value: WebhookBacklog) => void): Promise<void> => {
      const value = await backlog.get();
      if (value !== undefined) set(value);
    };
    new Gauge({
      name: 'plant_store_webhook_backlog',
      help: `Webhook deliveries pending in the database, due or not, with the events not yet fanned out to an active webhook (read at most every ${BACKLOG_EVERY_MS / 1000} s)`,
      registers,
      async collect() {
        await read((value) => this.set(value.pending));
      },
    }).set(Number.NaN);
    new Gauge({
      name: 'plant_store_webhook_oldest_pending_seconds',
      help: `Age of the oldest of those pending deliveries, 0 when none (read at most every ${BACKLOG_EVERY_MS / 1000} s)`,
      registers,
      async collect() {
        await read((value) => this.set(value.oldestPendingMs / 1000));
      },
    }).set(Number.NaN);
    new Gauge({
      name: 'plant_store_webhooks',
      help: `Webhooks by status: active, disabled (read at most every ${BACKLOG_EVERY_MS / 1000} s)`,
      labelNames: ['status'],
      registers,
      async collect() {
        await read((value) => {
          this.set({ status: 'active' }, value.webhooks.active);
          this.set({ status: 'disabled' }, value.webhooks.disabled);
        });
      },
    });
    new Gauge({
      name: 'plant_store_event_streams',
      help: 'Change-feed streams (GET /events) open in this process',
      registers,
      collect() {
        this.set(options.openStreams());
      },
    });
  }

  /** Called by the dispatcher once per attempt, as it ends. */
  observeAttempt(result: AttemptResultKind, seconds: number): void {
    this.attempts[result].inc();
    this.durations.observe(seconds);
  }
}
