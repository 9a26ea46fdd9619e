import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect, nanos } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import { Webhook } from 'standardwebhooks';
import { type ServerProcess, mintCliToken, startServer } from '../process.js';
import { freePort } from '../support/postgres.js';
import { ownBrokersPossible, ownNats, ownRabbit } from './own-brokers.js';

// Nothing lost, once where the broker can tell (docs/api.md#destinations): creates under load with
// one webhook on a NATS destination and one on a RabbitMQ destination, while the service is killed
// (SIGKILL) and started again, then the NATS server, then the RabbitMQ node, each on brokers of the
// test's own. Every acknowledged create's event is in the JetStream stream exactly once (one message
// per webhook-id), in the RabbitMQ queue at least once (a repeat only with the same message_id and
// body), and every message's signature verifies.

const unable = ownBrokersPossible();
const SCHEDULE = ['0s', '200ms', '500ms', ...Array.from({ length: 17 }, () => '1s')].join(',');

test(
  'kill -9 of the service, of NATS and of RabbitMQ under load: JetStream once, RabbitMQ at least once, all signed',
  { skip: unable, timeout: 300_000 },
  async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'plant-store-broker-crash-'));
    const nats = await ownNats(dir);
    const rabbit = await ownRabbit(dir);
    // One hook, in this order: the brokers stop before their folder goes.
    t.after(() => {
      nats.kill();
      rabbit.kill();
      rmSync(dir, { recursive: true, force: true });
    });
    await nats.start();
    await rabbit.start();

    // The stream and the queue the subscriber made, on disk, so they outlive their broker's crash.
    const nc = await natsConnect({
      servers: `127.0.0.1:${nats.port}`,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 200,
    });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'PLANTS', subjects: ['acme.plants.>'], duplicate_window: nanos(300_000) });
    const setup = await amqpConnect(rabbit.url);
    const channel = await setup.createChannel();
    await channel.assertExchange('plants', 'direct', { durable: true });
    await channel.assertQueue('mirror', { durable: true });
    await channel.bindQueue('mirror', 'plants', 'changes');
    await setup.close();

    const port = await freePort();
    const env = {
      DATABASE_URL: `sqlite:${join(dir, 'store.db')}`,
      PORT: String(port),
      RATE_LIMIT: 'off',
      WEBHOOK_RETRY_SCHEDULE: SCHEDULE,
      BROKERS: `events=${nats.url}?allow=acme.plants,bus=${rabbit.url}?allow=plants`,
    };
    let server: ServerProcess = await startServer(env);
    t.after(() => server.stop());
    const token = await mintCliToken(env, 'alice', 'plants:read,plants:write,webhooks:write');
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const secrets: string[] = [];
    for (const destination of [
      { broker: 'events', subject: 'acme.plants.changes' },
      { broker: 'bus', routingKey: 'changes' },
    ]) {
      const res = await fetch(`${server.url}/webhooks`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ destination, events: ['plant.created'] }),
      });
      assert.equal(res.status, 201, await res.clone().text());
      secrets.push(((await res.json()) as { secret: string }).secret);
    }

    // Creates, 4 at a time, until told to stop; the ids answered 200 are acknowledged.
    const acknowledged = new Set<number>();
    let stop = false;
    let next = 1;
    const writer = async (): Promise<void> => {
      while (!stop) {
        const id = next++;
        try {
          const res = await fetch(`http://127.0.0.1:${port}/plants`, {
            method: 'POST',
            headers,
            body: `{"id":${id},"name":"fern ${id}"}`,
            signal: AbortSignal.timeout(5000),
          });
          await res.arrayBuffer();
          if (res.status === 200) acknowledged.add(id);
        } catch {
          await new Promise((r) => setTimeout(r, 50)); // the service is down: its next life takes them
        }
      }
    };
    const writers = Promise.all(Array.from({ length: 4 }, writer));
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

    await pause(1500);
    server.child.kill('SIGKILL');
    await new Promise((r) => server.child.once('exit', r));
    server = await startServer(env);
    await pause(1500);
    nats.kill();
    await pause(1000);
    await nats.start();
    await pause(1500);
    rabbit.kill();
    await pause(1000);
    await rabbit.start();
    await pause(2000);
    stop = true;
    await writers;
    assert.ok(acknowledged.size > 100, `${acknowledged.size} creates acknowledged`);

    // Every acknowledged create's event, in the stream once and in the queue, within the lease of the
    // deliveries the killed service held (60 s) and the retry schedule.
    const streamed = new Map<string, { body: string; headers: Record<string, string> }[]>();
    const queued = new Map<string, { body: string; headers: Record<string, string> }[]>();
    const plantOf = (body: string): number => Number(/"id":(\d+)/.exec(body)![1]);
    const seen = (messages: Map<string, unknown[]>): Set<number> =>
      new Set([...messages.values()].flat().map((m) => plantOf((m as { body: string }).body)));
    let readSeq = 1;
    const consumer = await amqpConnect(rabbit.url);
    const reader = await consumer.createChannel();
    const deadline = Date.now() + 150_000;
    for (;;) {
      const last = (await jsm.streams.info('PLANTS')).state.last_seq;
      for (; readSeq <= last; readSeq++) {
        const m = await jsm.streams.getMessage('PLANTS', { seq: readSeq });
        if (m === null) continue;
        const h: Record<string, string> = {};
        for (const k of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'plant-store-event'])
          h[k] = m.header.get(k);
        const list = streamed.get(h['webhook-id']!) ?? [];
        list.push({ body: new TextDecoder().decode(m.data), headers: h });
        streamed.set(h['webhook-id']!, list);
      }
      for (
        let m = await reader.get('mirror', { noAck: true });
        m !== false;
        m = await reader.get('mirror', { noAck: true })
      ) {
        const raw = m.properties.headers as Record<string, unknown>;
        const h: Record<string, string> = {};
        for (const k of ['webhook-id', 'webhook-timestamp', 'webhook-signature', 'plant-store-event'])
          h[k] = String(raw[k]);
        assert.equal(m.properties.messageId, h['webhook-id'], 'message_id is the webhook-id');
        const list = queued.get(h['webhook-id']!) ?? [];
        list.push({ body: m.content.toString('utf8'), headers: h });
        queued.set(h['webhook-id']!, list);
      }
      const missing = (messages: Map<string, unknown[]>) => [...acknowledged].filter((id) => !seen(messages).has(id));
      if (missing(streamed).length === 0 && missing(queued).length === 0) break;
      if (Date.now() > deadline) {
        assert.fail(
          `after 150 s, acknowledged creates missing from the stream: ${missing(streamed).slice(0, 10).join(', ')}; ` +
            `from the queue: ${missing(queued).slice(0, 10).join(', ')} (of ${acknowledged.size})`,
        );
      }
      await pause(500);
    }
    await consumer.close();
    await nc.close();

    // JetStream: one message per webhook-id. RabbitMQ: repeats only of the same message.
    const doubled = [...streamed].filter(([, list]) => list.length > 1).map(([id]) => id);
    assert.deepEqual(doubled, [], 'no webhook-id twice in the stream');
    for (const [id, list] of queued) {
      assert.ok(
        list.every((m) => m.body === list[0]!.body),
        `${id}: every copy in the queue has the same body`,
      );
    }
    // Every message verifies with its webhook's secret.
    const [natsSecret, rabbitSecret] = secrets;
    for (const [secret, messages] of [
      [natsSecret!, streamed],
      [rabbitSecret!, queued],
    ] as const) {
      for (const m of [...messages.values()].flat()) {
        assert.doesNotThrow(() => new Webhook(secret).verify(m.body, m.headers), `${m.headers['webhook-id']} verifies`);
      }
    }
    t.diagnostic(
      `acknowledged ${acknowledged.size}; stream ${streamed.size} messages; queue ${[...queued.values()].flat().length} ` +
        `messages for ${queued.size} webhook-ids`,
    );
  },
);
