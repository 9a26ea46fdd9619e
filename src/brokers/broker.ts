import type { FastifyBaseLogger } from 'fastify';
import type { BrokerSetting } from '../wire/broker-settings.js';
import type { Broker, BrokerMessage, BrokerState, Published, StateListener } from './message.js';
import { NatsBroker } from './nats-broker.js';
import { RabbitBroker } from './rabbit-broker.js';

/**
 * The brokers BROKERS names, each connected once per process when the dispatcher starts. A change of
 * a broker's connection is one log line (its URL shown without the password) and the gauge
 * plant_store_broker_up.
 */
export class Brokers {
  readonly #brokers = new Map<string, Broker>();
  readonly #states = new Map<string, BrokerState>();
  readonly #reported = new Map<string, BrokerState>();

  constructor(
    readonly settings: readonly BrokerSetting[],
    private readonly log: FastifyBaseLogger,
  ) {
    for (const setting of settings) {
      const onState: StateListener = (state, reason) => this.#changed(setting, state, reason);
      this.#brokers.set(
        setting.name,
        setting.kind === 'nats' ? new NatsBroker(setting, onState) : new RabbitBroker(setting, onState),
      );
      this.#states.set(setting.name, 'down');
    }
  }

  /** Each broker's state now, for the gauge. */
  states(): ReadonlyMap<string, BrokerState> {
    return this.#states;
  }

  get(name: string): Broker | undefined {
    return this.#brokers.get(name);
  }

  /** Publishes to the broker `name`; an error's words never hold its password. */
  async publish(name: string, message: BrokerMessage, timeoutMs: number): Promise<Published> {
    const broker = this.#brokers.get(name);
    if (broker === undefined) return { error: `the broker "${name}" is not named in BROKERS` };
    const published = await broker.publish(message, timeoutMs);
    return published.error === undefined ? published : { error: scrub(published.error, broker.setting) };
  }

  start(): void {
    for (const broker of this.#brokers.values()) broker.start();
  }

  async close(): Promise<void> {
    await Promise.all([...this.#brokers.values()].map((b) => b.close()));
  }

  #changed(setting: BrokerSetting, state: BrokerState, reason: string | undefined): void {
    // The first state is logged too: a broker that cannot be reached from the start says so once.
    if (this.#reported.get(setting.name) === state) return;
    this.#reported.set(setting.name, state);
    this.#states.set(setting.name, state);
    const fields = {
      broker: setting.name,
      url: setting.shown,
      ...(reason !== undefined && { reason: scrub(reason, setting) }),
    };
    if (state === 'up') this.log.info(fields, 'broker connected');
    else this.log.warn(fields, 'broker not connected; reconnecting');
  }
}

/** `text` with the broker's password, as written in its URL or decoded, replaced by `***`. */
function scrub(text: string, setting: BrokerSetting): string {
  const password = new URL(setting.url).password;
  if (password === '') return text;
  return text.replaceAll(password, '***').replaceAll(decodeURIComponent(password), '***');
}
