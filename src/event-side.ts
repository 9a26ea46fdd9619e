import type { FastifyBaseLogger } from 'fastify';
import { Brokers } from './brokers/broker.js';
import type { EventSettings } from './config.js';
import { EventPruner } from './events/pruner.js';
import type { Store } from './store/store.js';
import { ApiPressure } from './webhooks/api-pressure.js';
import type { AttemptResultKind } from './webhooks/attempt-result.js';
import { Dispatcher } from './webhooks/dispatcher.js';
import { SecretBox } from './webhooks/secret-box.js';
import { WebhookSender } from './webhooks/sender.js';
import { TargetSender } from './webhooks/target-sender.js';

export interface EventSide {
  readonly dispatcher: Dispatcher;
  /** The brokers BROKERS names, connected while this process sends. */
  readonly brokers: Brokers;
  /** Stops pruning, drains the dispatcher (the requests out finish and are recorded), closes the sender. */
  stop(): Promise<void>;
}

/**
 * What `serve` runs beside the HTTP app: the webhook dispatcher and the event log's pruning.
 * `requests` counts the API requests this process has received (the dispatcher yields to them);
 * `observe` is told of every attempt (the metrics). With WEBHOOK_DELIVERY=off the dispatcher does
 * not start: the deliveries wait in the database for a process that sends; the pruning still runs
 * (it keeps every pending delivery, and every event not yet fanned out: docs/decisions.md).
 * It wires webhooks/ and events/ together, so it is composed here beside server.ts, not inside
 * either feature.
 */
export function startEventSide(
  store: Store,
  settings: EventSettings,
  log: FastifyBaseLogger,
  requests: () => number,
  observe?: (result: AttemptResultKind, seconds: number) => void,
): EventSide {
  const brokers = new Brokers(settings.brokers, log);
  const sender = new TargetSender(
    new WebhookSender({
      allowPrivate: settings.allowPrivateTargets,
      timeoutMs: settings.deliveryTimeoutMs,
      connectionsPerOrigin: settings.maxInFlightPerWebhook,
    }),
    brokers,
    settings.deliveryTimeoutMs,
  );
  const dispatcher = new Dispatcher(
    store,
    sender,
    new SecretBox(settings.secretsKey),
    settings,
    log,
    new ApiPressure(requests),
    undefined,
    observe,
  );
  const pruner = new EventPruner(store, settings.retentionMs, log);
  if (settings.delivery) {
    brokers.start();
    dispatcher.start();
  } else log.info('webhook delivery is off (WEBHOOK_DELIVERY=off): this process sends no webhook');
  pruner.start();
  return {
    dispatcher,
    brokers,
    stop: async () => {
      // A dispatcher never started holds no lease: nothing to give back.
      await Promise.all([pruner.stop(), settings.delivery ? dispatcher.drain() : undefined]);
      await sender.close();
    },
  };
}
