import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import { type JetStreamManager, jetstreamManager } from '@nats-io/jetstream';
import { type NatsConnection, connect, nanos } from '@nats-io/transport-node';
import { type Channel, type ChannelModel, connect as amqpConnect } from 'amqplib';

// The brokers this machine runs (NATS with JetStream on 127.0.0.1:4222, RabbitMQ on :5672 with
// guest/guest; .ci/run starts them when stopped). Each test gets names of its own: a stream and
// a subject prefix, an exchange and a queue, removed when it ends.

export const NATS_URL = process.env.TEST_NATS_URL ?? 'nats://127.0.0.1:4222';
export const AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

export interface NatsPlace {
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
  /** The subject prefix BROKERS allows. */
  readonly prefix: string;
  /** The stream, which takes `<prefix>.in.>` only: `<prefix>.elsewhere` has no stream. */
  readonly stream: string;
}

export async function natsPlace(t: TestContext): Promise<NatsPlace> {
  const tag = randomBytes(4).toString('hex');
  // A broker .ci/run has just started may not listen yet: the first connection waits for it.
  const nc = await connect({ servers: new URL(NATS_URL).host, waitOnFirstConnect: true, maxReconnectAttempts: 60 });
  const jsm = await jetstreamManager(nc);
  const prefix = `pstest${tag}`;
  const stream = `PSTEST_${tag}`;
  await jsm.streams.add({ name: stream, subjects: [`${prefix}.in.>`], duplicate_window: nanos(120_000) });
  t.after(async () => {
    await jsm.streams.delete(stream).catch(() => {});
    await nc.close();
  });
  return { nc, jsm, prefix, stream };
}

export interface RabbitPlace {
  readonly connection: ChannelModel;
  readonly channel: Channel;
  /** The exchange BROKERS allows (direct), with `queue` bound for the routing key `plants`. */
  readonly exchange: string;
  readonly queue: string;
}

export async function rabbitPlace(t: TestContext): Promise<RabbitPlace> {
  const tag = randomBytes(4).toString('hex');
  const connection = await retried(() =>
    amqpConnect(AMQP_URL, { clientProperties: { connection_name: 'plant-store-test' } }),
  );
  const channel = await connection.createChannel();
  const exchange = `pstest-${tag}`;
  const queue = `pstest-${tag}-plants`;
  await channel.assertExchange(exchange, 'direct', { durable: false });
  await channel.assertQueue(queue, { durable: true });
  await channel.bindQueue(queue, exchange, 'plants');
  t.after(async () => {
    await channel.deleteQueue(queue).catch(() => {});
    await channel.deleteExchange(exchange).catch(() => {});
    await connection.close().catch(() => {});
  });
  return { connection, channel, exchange, queue };
}

/** BROKERS for the two places: `nats` and `rabbit`. */
export const brokersSetting = (nats: NatsPlace, rabbit: RabbitPlace): string =>
  `nats=${NATS_URL}?allow=${nats.prefix},rabbit=${AMQP_URL}?allow=${rabbit.exchange}`;

/** `connect`, tried again each second for up to a minute while the broker does not answer. */
async function retried<T>(connect: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await connect();
    } catch (error) {
      if (attempt >= 60) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}
