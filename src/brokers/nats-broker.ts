import { type JetStreamClient, jetstream } from '@nats-io/jetstream';
import { type NatsConnection, connect, headers as natsHeaders } from '@nats-io/transport-node';
import type { BrokerSetting } from '../wire/broker-settings.js';
import { type Broker, type BrokerMessage, type Published, type StateListener, withTimeout } from './message.js';

/**
 * A NATS server with JetStream. One connection, opened at start and reconnecting for ever (every
 * second, with jitter); a publish is delivered when a stream acknowledges it. `Nats-Msg-Id` is the
 * delivery's `webhook-id`, so the stream's duplicate window keeps a retried message once.
 */
export class NatsBroker implements Broker {
  readonly kind = 'nats';
  #connection: Promise<NatsConnection> | undefined;
  #js: JetStreamClient | undefined;
  #closed = false;

  constructor(
    readonly setting: BrokerSetting,
    private readonly onState: StateListener,
  ) {}

  get name(): string {
    return this.setting.name;
  }

  start(): void {
    void this.#connect();
  }

  #connect(): Promise<NatsConnection> {
    this.#connection ??= (async () => {
      const url = new URL(this.setting.url);
      const connection = await connect({
        servers: `${url.hostname}:${url.port || '4222'}`,
        ...(url.username !== '' && { user: decodeURIComponent(url.username) }),
        ...(url.password !== '' && { pass: decodeURIComponent(url.password) }),
        name: 'plant-store',
        // Reconnect for ever, the first connection included: a broker that is down at start is
        // waited for, and the attempts meanwhile fail and wait on the retry schedule.
        maxReconnectAttempts: -1,
        waitOnFirstConnect: true,
        reconnectTimeWait: 1000,
      });
      this.#js = jetstream(connection, { timeout: 10_000 });
      this.onState('up');
      void (async () => {
        for await (const status of connection.status()) {
          if (status.type === 'disconnect') this.onState('down', 'disconnected');
          else if (status.type === 'reconnect') this.onState('up');
        }
      })();
      return connection;
    })();
    this.#connection.catch((error: unknown) => {
      // A refused login or a bad URL: reported, and tried again at the next publish.
      this.onState('down', describe(error));
      this.#connection = undefined;
    });
    return this.#connection;
  }

  async publish(message: BrokerMessage, timeoutMs: number): Promise<Published> {
    if (this.#closed) return { error: 'the broker connection is closed' };
    const connection = await withTimeout(this.#connect(), timeoutMs, `no connection to NATS "${this.name}"`);
    if (typeof connection === 'string') return { error: connection };
    if (connection.isClosed() || this.#js === undefined) return { error: `no connection to NATS "${this.name}"` };
    const h = natsHeaders();
    for (const [key, value] of Object.entries(message.headers)) h.set(key, value);
    try {
      const ack = await this.#js.publish(message.target, message.body, {
        msgID: message.messageId,
        headers: h,
        timeout: timeoutMs,
      });
      return { answer: `stream ${ack.stream}, seq ${ack.seq}${ack.duplicate ? ', duplicate' : ''}` };
    } catch (error) {
      return { error: describe(error) };
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    const connection = await this.#connection?.catch(() => undefined);
    await connection?.drain().catch(() => connection.close());
  }
}

/** An error in the words an attempt shows its owner; nats.js's own messages name no credential. */
function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  // nats.js names a publish no stream answered JetStreamNotEnabled ("no responders" beneath).
  if ((error instanceof Error && error.name === 'JetStreamNotEnabled') || /no responders/i.test(message)) {
    return 'no stream takes this subject (no responders)';
  }
  if (/timeout/i.test(message)) return `no acknowledgement from JetStream: ${message}`;
  return message;
}
