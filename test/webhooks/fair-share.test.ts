import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type Socket, createServer } from 'node:net';
import { test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import { TestReceiver, addWebhook, deliveryHarness, eventually } from './delivery-harness.js';

// Issue 33, point 2 (contract 1.3.0, fairness): one subject whose receivers hang holds at most its
// own share of a process's in-flight deliveries, and another subject's deliveries keep their
// latency. Before the fix, subject M's hanging webhooks took all 256 slots of a process (32 each,
// the webhooks walked from the first id at every claim), and subject A's delivery waited until M's
// attempts timed out. Proven by order, not by a clock: A's delivery arrives while every one of M's
// attempts is still out (none has ended, none is recorded), so it waited for none of them. Both
// engines (test/postgres/webhooks.test.ts runs this folder again there).

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

/** A receiver that accepts every connection and never answers. */
async function hangingReceiver(t: Parameters<typeof deliveryHarness>[0]) {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopped ??= (async () => {
      for (const socket of sockets) socket.destroy();
      server.close();
      await once(server, 'close');
    })());
  t.after(stop);
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/hangs`;
  return { url, accepted: () => accepted, stop };
}

test("a subject's hanging receivers hold at most its share; another subject's delivery does not wait for them", async (t) => {
  const h = await deliveryHarness(t);
  const hanging = await hangingReceiver(t);
  const healthy = await new TestReceiver().start(t);
  const m = await h.token('mallory', SCOPES);
  const a = await h.token('alice', SCOPES);
  const add = (token: string, url: string): Promise<string> => addWebhook(h, token, url);
  // Alice's webhook first, so that an id order puts every one of mallory's after it or before it
  // by chance alone: the fairness must not depend on it.
  const alices = await add(a, healthy.url);
  const mallorys: string[] = [];
  for (let i = 0; i < h.settings.maxWebhooksPerSubject; i++) mallorys.push(await add(m, hanging.url));
  const create = async (token: string, id: number): Promise<void> => {
    const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(String(id), `plant ${id}`)) });
    assert.equal(res.statusCode, 200, res.payload);
  };
  // 15 plants of mallory's: 300 deliveries due, more than a process's 256 slots.
  for (let id = 1; id <= 15; id++) await create(m, id);

  const settings = { ...h.settings, maxInFlight: 256, maxInFlightPerWebhook: 32, maxInFlightPerSubject: 64 };
  const log = { warn: () => {}, info: () => {}, error: () => {}, debug: () => {} } as unknown as FastifyBaseLogger;
  // Attempts that end only after the test (a minute): every one of mallory's stays out meanwhile.
  const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 60_000, connectionsPerOrigin: 256 });
  const dispatcher = new Dispatcher(h.store, sender, new SecretBox(null), settings, log, undefined, () => h.now());
  dispatcher.start();
  try {
    await eventually(
      async () => (hanging.accepted() >= settings.maxInFlightPerSubject ? true : undefined),
      () => `mallory's share of attempts out (${hanging.accepted()} connections)`,
      30_000,
    );

    // Mallory goes on creating (4 a second) while alice creates one plant.
    let more = 100;
    const burst = setInterval(() => void create(m, more++).catch(() => {}), 250);
    try {
      await create(a, 1000);
      dispatcher.wake();
      await eventually(
        async () => (healthy.requests.length > 0 ? true : undefined),
        "alice's delivery at her receiver",
        30_000,
      );
    } finally {
      clearInterval(burst);
    }
    assert.equal((JSON.parse(healthy.requests[0]!.body) as { id: number }).id, 1000);

    // Not one of mallory's attempts had ended: alice's delivery waited for none of them.
    const records = await h.call(m, { method: 'GET', url: `/webhooks/${mallorys[0]}/deliveries?limit=100` });
    const deliveries = JSON.parse(records.payload) as Array<{ attempts: number }>;
    assert.ok(deliveries.length >= 15);
    assert.ok(
      deliveries.every((d) => d.attempts === 0),
      'no attempt of mallory is recorded yet',
    );
    // Mallory holds at most its share of the process's slots, whatever its 20 webhooks' shares add up to.
    assert.ok(hanging.accepted() <= settings.maxInFlightPerSubject, `${hanging.accepted()} of mallory's attempts out`);
    assert.ok(alices.startsWith('wh_'));
  } finally {
    // Before the harness closes the store (its after-hook was registered first): the hanging
    // receiver's sockets destroyed, the attempts still out end, and the dispatcher drains.
    await hanging.stop();
    await dispatcher.drain();
    await sender.close();
  }
});
