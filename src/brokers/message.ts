import type { BrokerSetting } from '../wire/broker-settings.js';

/** One delivery as a broker message: `target` is the NATS subject or the RabbitMQ routing key. */
export interface BrokerMessage {
  readonly target: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** The delivery's `webhook-id`: NATS' Nats-Msg-Id, AMQP's message_id. */
  readonly messageId: string;
}

/** The broker's acknowledgement in words (`answer`), or why the message is not delivered (`error`). */
export type Published = { readonly answer: string; readonly error?: undefined } | { readonly error: string };

export type BrokerState = 'up' | 'down';
export type StateListener = (state: BrokerState, reason?: string) => void;

export interface Broker {
  readonly name: string;
  readonly kind: BrokerSetting['kind'];
  readonly setting: BrokerSetting;
  /** Opens the connection; it reconnects by itself from then on. */
  start(): void;
  /** Never throws: every failure is `error`. */
  publish(message: BrokerMessage, timeoutMs: number): Promise<Published>;
  close(): Promise<void>;
}

/** The promise's value, or `failure` (a string) when it rejects or takes longer than `ms`. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, failure: string): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise.catch((error: unknown) => `${failure}: ${error instanceof Error ? error.message : String(error)}`),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(`${failure} within ${ms} ms`), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
