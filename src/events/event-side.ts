import type { FastifyBaseLogger } from 'fastify';
import type { EventSettings } from '../config.js';
import type { Store } from '../store/store.js';
import { ApiPressure } from '../webhooks/api-pressure.js';
import { Dispatcher } from '../webhooks/dispatcher.js';
import { SecretBox } from '../webhooks/secret-box.js';
import { WebhookSender } from '../webhooks/sender.js';
import { EventPruner } from './pruner.js';

export interface EventSide {
  readonly dispatcher: Dispatcher;
  /** Stops pruning, drains the dispatcher (the requests out finish and are recorded), closes the sender. */
  stop(): Promise<void>;
}

/**
 * What `serve` runs beside the HTTP app: the webhook dispatcher and the event log's pruning.
 * `requests` counts the API requests this process has received (the dispatcher yields to them).
 */
export function startEventSide(
  store: Store,
  settings: EventSettings,
  log: FastifyBaseLogger,
  requests: () => number,
): EventSide {
  const sender = new WebhookSender({
    allowPrivate: settings.allowPrivateTargets,
    timeoutMs: settings.deliveryTimeoutMs,
    connectionsPerOrigin: settings.maxInFlightPerWebhook,
  });
  const dispatcher = new Dispatcher(
    store,
    sender,
    new SecretBox(settings.secretsKey),
    settings,
    log,
    new ApiPressure(requests),
  );
  const pruner = new EventPruner(store, settings.retentionMs, log);
  dispatcher.start();
  pruner.start();
  return {
    dispatcher,
    stop: async () => {
      await Promise.all([pruner.stop(), dispatcher.drain()]);
      await sender.close();
    },
  };
}
