import type { Brokers } from '../brokers/broker.js';
import { destinationKey, destinationOf } from '../brokers/destination.js';
import type { WebhookAttempt, WebhookRequest, WebhookSender } from './sender.js';

/** The headers a broker message carries: the signature's three and the event type (docs/api.md#destinations). */
const MESSAGE_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'plant-store-event'] as const;

/**
 * Sends a delivery to its webhook's target: a URL over HTTP (WebhookSender), a destination as one
 * broker message. A message is delivered when the broker acknowledges it (`accepted`), and the
 * broker's answer is the attempt's response text.
 */
export class TargetSender {
  constructor(
    private readonly http: Pick<WebhookSender, 'send' | 'close'>,
    private readonly brokers: Brokers,
    private readonly timeoutMs: number,
  ) {}

  async send(request: WebhookRequest): Promise<WebhookAttempt> {
    const destination = destinationOf(request.url);
    if (destination === null) return this.http.send(request);
    const started = performance.now();
    const headers: Record<string, string> = {};
    for (const name of MESSAGE_HEADERS) {
      const value = request.headers[name];
      if (value !== undefined) headers[name] = value;
    }
    const published = await this.brokers.publish(
      destination.broker,
      {
        target: destinationKey(destination),
        headers,
        body: typeof request.body === 'string' ? request.body : Buffer.from(request.body).toString('utf8'),
        messageId: headers['webhook-id'] ?? '',
      },
      this.timeoutMs,
    );
    const durationMs = Math.round(performance.now() - started);
    return published.error === undefined
      ? { durationMs, accepted: true, responseSnippet: published.answer }
      : { durationMs, error: published.error };
  }

  async close(): Promise<void> {
    await this.http.close();
    await this.brokers.close();
  }
}
