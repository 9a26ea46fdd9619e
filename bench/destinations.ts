// Destinations' throughput, on SQLite: events per second from commit to the broker's
// acknowledgement (a backlog of committed events sent by one process that starts once they are),
// beside a bare publisher loop of the same client library on the same broker (the platform's
// limit), as a ratio measured in one run; then live, creates through that process while it sends
// (one instance): events per second, and the time from a create being sent to its message reaching
// a consumer, p50 and p99.
//
//   node --import tsx bench/destinations.ts [--broker nats|amqp|both] [--events 3000] [--rounds 3]
//
// The brokers this machine runs (NATS with JetStream on 127.0.0.1:4222, RabbitMQ on :5672,
// guest/guest). Each round: a webhook with a destination on a stream or queue of its own; `--events`
// creates, 16 at a time, through a process with WEBHOOK_DELIVERY=off; then a second process sends
// them; then `--events` more creates through it; a consumer takes every message. Then the bare
// loop: the same number of messages of the same size and headers, 32 in flight (a webhook's most
// in flight in one process), each awaited to its acknowledgement.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders, nanos } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import { arg, exitOnSignal, log } from './kit/process.js';
import { mintToken, startService } from './kit/server.js';
import { median, percentile } from './kit/stats.js';

exitOnSignal();
const which = arg('broker', 'both');
const EVENTS = Number(arg('events', '3000'));
const ROUNDS = Number(arg('rounds', '3'));
const NATS = 'nats://127.0.0.1:4222';
const AMQP = 'amqp://guest:guest@127.0.0.1:5672';
const HEADERS = {
  'webhook-id': 'evt_1',
  'webhook-timestamp': '1700000000',
  'webhook-signature': `v1,${'x'.repeat(44)}`,
  'plant-store-event': 'plant.created',
};

interface Sink {
  /** BROKERS for the service. */
  readonly brokers: string;
  readonly destination: Record<string, string>;
  /** Calls `seen(body)` for each message that reaches the consumer. */
  consume(seen: (body: string) => void): Promise<void>;
  /** The bare loop: `n` messages of `body`, 32 in flight, each acknowledged. */
  bare(n: number, body: string): Promise<number>;
  close(): Promise<void>;
}

async function natsSink(): Promise<Sink> {
  const tag = randomBytes(4).toString('hex');
  const nc = await natsConnect({ servers: '127.0.0.1:4222' });
  const jsm = await jetstreamManager(nc);
  const js = jetstream(nc);
  const stream = `BENCHDEST_${tag}`;
  const prefix = `benchdest${tag}`;
  await jsm.streams.add({ name: stream, subjects: [`${prefix}.>`], duplicate_window: nanos(120_000) });
  return {
    brokers: `bench=${NATS}?allow=${prefix}`,
    destination: { broker: 'bench', subject: `${prefix}.service` },
    async consume(seen) {
      // A core subscription: each message as the stream stores it, no consumer acknowledgement.
      const sub = nc.subscribe(`${prefix}.service`);
      void (async () => {
        for await (const m of sub) seen(m.string());
      })();
      await nc.flush();
    },
    async bare(n, body) {
      const h = natsHeaders();
      for (const [k, v] of Object.entries(HEADERS)) h.set(k, v);
      const started = performance.now();
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < n) {
          const i = next++;
          await js.publish(`${prefix}.bare`, body, { msgID: `bare-${tag}-${i}`, headers: h, timeout: 10_000 });
        }
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      return (n / (performance.now() - started)) * 1000;
    },
    async close() {
      await jsm.streams.delete(stream).catch(() => {});
      await nc.close();
    },
  };
}

async function amqpSink(): Promise<Sink> {
  const tag = randomBytes(4).toString('hex');
  const connection = await amqpConnect(AMQP);
  const channel = await connection.createConfirmChannel();
  const exchange = `benchdest-${tag}`;
  await channel.assertExchange(exchange, 'direct', { durable: false });
  for (const key of ['service', 'bare']) {
    await channel.assertQueue(`${exchange}-${key}`, { durable: true });
    await channel.bindQueue(`${exchange}-${key}`, exchange, key);
  }
  return {
    brokers: `bench=${AMQP}?allow=${exchange}`,
    destination: { broker: 'bench', routingKey: 'service' },
    async consume(seen) {
      const consumer = await connection.createChannel();
      await consumer.consume(`${exchange}-service`, (m) => m && seen(m.content.toString('utf8')), { noAck: true });
    },
    async bare(n, body) {
      const content = Buffer.from(body);
      const started = performance.now();
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < n) {
          const i = next++;
          await new Promise<void>((resolve, reject) =>
            channel.publish(
              exchange,
              'bare',
              content,
              {
                mandatory: true,
                persistent: true,
                messageId: `bare-${i}`,
                contentType: 'application/json',
                headers: HEADERS,
              },
              (error: unknown) => (error ? reject(new Error('nacked')) : resolve()),
            ),
          );
        }
      };
      await Promise.all(Array.from({ length: 32 }, worker));
      return (n / (performance.now() - started)) * 1000;
    },
    async close() {
      for (const key of ['service', 'bare']) await channel.deleteQueue(`${exchange}-${key}`).catch(() => {});
      await channel.deleteExchange(exchange).catch(() => {});
      await connection.close().catch(() => {});
    },
  };
}

interface Round {
  /** A backlog of EVENTS committed events, sent by a process that starts once they are: events/s. */
  readonly drain: number;
  /** EVENTS creates while a process sends: events/s from the first create to the last message. */
  readonly live: number;
  readonly bare: number;
  readonly p50: number;
  readonly p99: number;
}

async function round(kind: 'nats' | 'amqp'): Promise<Round> {
  const sink = kind === 'nats' ? await natsSink() : await amqpSink();
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-dest-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}`, RATE_LIMIT: 'off', BROKERS: sink.brokers };
  // Two processes on one database: `api` takes the creates and sends nothing; `sender` sends.
  const api = await startService(dir, { ...env, WEBHOOK_DELIVERY: 'off' });
  let sender: Awaited<ReturnType<typeof startService>> | undefined;
  try {
    const token = mintToken(env, 'bench', 'plants:read,plants:write,webhooks:write');
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const made = await fetch(`${api.url}/webhooks`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ destination: sink.destination, events: ['plant.created'] }),
    });
    if (made.status !== 201) throw new Error(`POST /webhooks: ${made.status} ${await made.text()}`);
    // A message may reach the consumer before its create's 200 reaches the client: latency is
    // measured from when the create was sent, an upper bound of the time from its commit.
    const sent = new Map<string, number>();
    const arrived = new Map<string, number>();
    let last = 0;
    await sink.consume((body) => {
      const id = /"id":(\d+)/.exec(body)?.[1];
      last = performance.now();
      if (id !== undefined && !arrived.has(id)) arrived.set(id, last);
    });
    const create = async (url: string, from: number): Promise<void> => {
      let next = from;
      const creator = async (): Promise<void> => {
        while (next < from + EVENTS) {
          const id = String(next++);
          sent.set(id, performance.now());
          const answer = await fetch(`${url}/plants`, {
            method: 'POST',
            headers: auth,
            body: `{"id":${id},"name":"fern ${id}","tag":"bench"}`,
          });
          await answer.arrayBuffer();
          if (answer.status !== 200) throw new Error(`POST /plants: ${answer.status}`);
        }
      };
      await Promise.all(Array.from({ length: 16 }, creator));
    };
    const all = async (n: number): Promise<void> => {
      const deadline = Date.now() + 180_000;
      while (arrived.size < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      if (arrived.size < n) throw new Error(`${arrived.size} of ${n} messages arrived`);
    };

    await create(api.url, 1_000_000); // the backlog, committed while nothing sends
    sender = await startService(dir, env);
    const drainFrom = performance.now();
    await all(EVENTS);
    const drain = (EVENTS / (last - drainFrom)) * 1000;

    const liveFrom = performance.now();
    await create(sender.url, 2_000_000); // live: through the process that sends, as one instance serves
    await all(2 * EVENTS);
    const live = (EVENTS / (last - liveFrom)) * 1000;
    const latencies = [...arrived].filter(([id]) => id.startsWith('2')).map(([id, at]) => at - sent.get(id)!);

    const bare = await sink.bare(EVENTS, '{"id":1000000,"name":"fern 1000000","tag":"bench"}');
    return { drain, live, bare, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  } finally {
    await sender?.stop();
    await api.stop();
    await sink.close();
  }
}

const kinds = which === 'both' ? (['nats', 'amqp'] as const) : ([which] as Array<'nats' | 'amqp'>);
console.log(
  '| broker | backlog sent, events/s | bare loop, msgs/s | backlog ÷ bare | live, events/s | live p50 | live p99 |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const kind of kinds) {
  const rounds: Round[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await round(kind);
    log(
      `${kind} round ${i + 1}: backlog ${r.drain.toFixed(0)}/s, bare ${r.bare.toFixed(0)}/s, live ${r.live.toFixed(0)}/s, ` +
        `p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms`,
    );
    rounds.push(r);
  }
  const cell = (f: (r: Round) => number, digits: number): string =>
    `${median(rounds.map(f)).toFixed(digits)} (${Math.min(...rounds.map(f)).toFixed(digits)}–${Math.max(...rounds.map(f)).toFixed(digits)})`;
  console.log(
    `| ${kind === 'nats' ? 'NATS JetStream' : 'RabbitMQ'} | ${cell((r) => r.drain, 0)} | ${cell((r) => r.bare, 0)} | ` +
      `${cell((r) => r.drain / r.bare, 2)} | ${cell((r) => r.live, 0)} | ${cell((r) => r.p50, 1)} ms | ${cell((r) => r.p99, 1)} ms |`,
  );
}
process.exit(0);
