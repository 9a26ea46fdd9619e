import { type ConfirmChannel, type Message, type RecoveringChannelModel, connect } from 'amqplib';
import type { BrokerSetting } from '../wire/broker-settings.js';
import { type Broker, type BrokerMessage, type Published, type StateListener, withTimeout } from './message.js';

/**
 * A RabbitMQ broker (AMQP 0-9-1), with amqplib. One connection that reconnects by itself (0.1 s
 * doubling to 30 s apart), and on each a new confirm channel. A message is published to the
 * broker's allowed exchange, `mandatory` and persistent, its `message_id` the delivery's
 * `webhook-id`; it is delivered on the broker's confirm. A nack, a return (no queue is bound for the
 * routing key), a closed channel or no confirm within the timeout fails the attempt: nothing is
 * queued while the connection is down.
 */
export class RabbitBroker implements Broker {
  readonly kind = 'amqp';
  #model: Promise<RecoveringChannelModel> | undefined;
  #channel: ConfirmChannel | undefined;
  /**
   * Messages out, by routing key and message id. A return arrives before its confirm (AMQP 0-9-1:
   * basic.return precedes basic.ack for an unroutable mandatory message), so the confirm finds
   * its message marked.
   */
  readonly #returned = new Map<string, boolean>();
  #closed = false;

  constructor(
    readonly setting: BrokerSetting,
    private readonly onState: StateListener,
  ) {}

  get name(): string {
    return this.setting.name;
  }

  start(): void {
    this.#model ??= connect(this.setting.url, {
      clientProperties: { connection_name: 'plant-store' },
      recovery: {
        maxDelay: 30_000,
        waitForConnect: false,
        setup: async (model: Pick<RecoveringChannelModel, 'createConfirmChannel'>) => {
          this.#channel = await this.#openChannel(model);
        },
      },
    }).then((model) => {
      model.on('connect', () => this.onState('up'));
      model.on('disconnect', (error: Error) => {
        this.#channel = undefined;
        this.onState('down', error.message);
      });
      model.on('connect-failed', (error: Error) => this.onState('down', error.message));
      model.on('error', () => {});
      return model;
    });
    this.#model.catch((error: unknown) => this.onState('down', String(error)));
  }

  /** A confirm channel that marks returned messages and forgets itself when it closes. */
  async #openChannel(model: Pick<RecoveringChannelModel, 'createConfirmChannel'>): Promise<ConfirmChannel> {
    const channel = await model.createConfirmChannel();
    channel.on('return', (returned: Message) => {
      const key = returnKey(returned.fields.routingKey, String(returned.properties.messageId));
      if (this.#returned.has(key)) this.#returned.set(key, true);
    });
    // A channel error (an exchange that is gone) closes the channel; the next publish opens another.
    channel.on('error', () => {});
    channel.on('close', () => {
      if (this.#channel === channel) this.#channel = undefined;
    });
    return channel;
  }

  /** The confirm channel, opened again after a channel error; undefined while the connection is down. */
  async #confirmChannel(): Promise<ConfirmChannel | undefined> {
    if (this.#channel !== undefined) return this.#channel;
    const model = await this.#model?.catch(() => undefined);
    if (model === undefined) return undefined;
    try {
      this.#channel = await this.#openChannel(model);
      return this.#channel;
    } catch {
      return undefined;
    }
  }

  async publish(message: BrokerMessage, timeoutMs: number): Promise<Published> {
    if (this.#closed) return { error: 'the broker connection is closed' };
    this.start();
    const channel = await withTimeout(this.#confirmChannel(), timeoutMs, `no connection to RabbitMQ "${this.name}"`);
    if (typeof channel === 'string') return { error: channel };
    if (channel === undefined) return { error: `no connection to RabbitMQ "${this.name}"` };
    const key = returnKey(message.target, message.messageId);
    // Two sends of one key at once (the same event to two webhooks with one routing key) route
    // alike: a return marks both.
    this.#returned.set(key, this.#returned.get(key) ?? false);
    try {
      const confirmed = new Promise<void>((resolve, reject) => {
        try {
          channel.publish(
            this.setting.allow,
            message.target,
            Buffer.from(message.body),
            {
              mandatory: true,
              persistent: true,
              messageId: message.messageId,
              contentType: 'application/json',
              headers: message.headers,
            },
            (error: unknown) => (error ? reject(error instanceof Error ? error : new Error('nacked')) : resolve()),
          );
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
      const sent = await withTimeout(confirmed, timeoutMs, `no confirm from RabbitMQ "${this.name}"`);
      if (typeof sent === 'string') return { error: sent };
      if (this.#returned.get(key) === true) {
        return { error: `unroutable: no queue is bound to exchange "${this.setting.allow}" for "${message.target}"` };
      }
      return { answer: 'confirmed' };
    } finally {
      this.#returned.delete(key);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const model = await this.#model?.catch(() => undefined);
    await model?.close().catch(() => {});
  }
}

/** A message out, as a return names it: its routing key and message id. */
const returnKey = (routingKey: string, messageId: string): string => `${routingKey}\n${messageId}`;
