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

/** A receiver that accepts every connection and never answers; `onOpen`/`onClose` hear of each. */
async function hangingReceiver(
  t: Parameters<typeof deliveryHarness>[0],
  onOpen: (socket: Socket) => void = () => {},
  onClose: (socket: Socket) => void = () => {},
) {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let closed = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.resume(); // read and drop the request: a client that gives up is then seen closing
    onOpen(socket);
    socket.on('close', () => {
      closed++;
      sockets.delete(socket);
      onClose(socket);
    });
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
  return { url, accepted: () => accepted, closed: () => closed, open: () => new Set(sockets), stop };
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

// Issue 36 (the webhooks axis of bench:scale): with many subjects' receivers hanging at once, each
// subject within its share, their shares added up to more than the process, and they took every
// slot (a slot of a hanging webhook is held for the sender's timeout, a healthy one's for
// milliseconds); a quarter of 1,000 webhooks hanging starved the rest. Now the webhooks whose last
// attempt did not succeed hold at most a quarter of the process together, one delivery each.
// Proven by counting: once every hanging webhook has failed once and the connections opened
// before are gone, the hanging receivers never hold more than that quarter open at once, while the
// healthy subject's deliveries go on. Before the change they held nearly every slot.
test('webhooks whose receivers hang, of many subjects at once, hold a quarter of the process together; the others are served', async (t) => {
  const h = await deliveryHarness(t);
  const settings = { ...h.settings, maxInFlight: 16, maxInFlightPerWebhook: 4, maxInFlightPerSubject: 4 };
  const quarter = settings.maxInFlight / 4;
  let open = 0;
  let maxOpen = 0;
  const failedOnce = new Set<number>();
  const receivers: Array<Awaited<ReturnType<typeof hangingReceiver>>> = [];
  for (let i = 0; i < 10; i++) {
    receivers.push(
      await hangingReceiver(
        t,
        () => void (maxOpen = Math.max(maxOpen, ++open)),
        () => {
          open--;
          failedOnce.add(i);
        },
      ),
    );
  }
  const healthy = await new TestReceiver().start(t);
  // Five subjects of two hanging webhooks each: their shares (4 each) add up to 20 of 16 slots.
  const hangers: string[] = [];
  for (let s = 0; s < 5; s++) {
    const token = await h.token(`hanger${s}`, SCOPES);
    hangers.push(token);
    for (const i of [2 * s, 2 * s + 1]) await addWebhook(h, token, receivers[i]!.url);
  }
  const alice = await h.token('alice', SCOPES);
  await addWebhook(h, alice, healthy.url);
  let next = 1;
  const create = async (token: string): Promise<void> => {
    const id = next++;
    const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(String(id), `plant ${id}`)) });
    assert.equal(res.statusCode, 200, res.payload);
  };
  for (let round = 0; round < 4; round++) for (const token of hangers) await create(token);

  const log = { warn: () => {}, info: () => {}, error: () => {}, debug: () => {} } as unknown as FastifyBaseLogger;
  // Attempts to a hanging receiver end after 300 ms, as failures.
  const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 300, connectionsPerOrigin: 256 });
  const dispatcher = new Dispatcher(h.store, sender, new SecretBox(null), settings, log, undefined, () => h.now());
  // The hanging subjects go on creating: their webhooks always have deliveries due.
  const pressure = setInterval(() => {
    for (const token of hangers) void create(token).catch(() => {});
  }, 100);
  dispatcher.start();
  try {
    await eventually(
      async () => (failedOnce.size === receivers.length ? true : undefined),
      () =>
        `every hanging webhook failed once (${failedOnce.size} of ${receivers.length}; accepted ${receivers.map((r) => r.accepted()).join(',')}, open ${open})`,
      60_000,
    );
    // The connections opened before all ten were known to fail end (each within the timeout).
    const before = receivers.flatMap((r) => [...r.open()]);
    await eventually(
      async () => (before.every((socket) => socket.destroyed) ? true : undefined),
      'the connections opened before closed',
      60_000,
    );
    maxOpen = open;
    const closedAtStart = receivers.reduce((sum, r) => sum + r.closed(), 0);
    const deliveredAtStart = healthy.requests.length;
    // Alice creates plants one by one, each delivered, while the hanging webhooks keep failing.
    for (let i = 0; i < 5; i++) {
      await create(alice);
      dispatcher.wake();
      const want = deliveredAtStart + i + 1;
      await eventually(
        async () => (healthy.requests.length >= want ? true : undefined),
        () => `alice's delivery ${i + 1} (${healthy.requests.length - deliveredAtStart} arrived)`,
        60_000,
      );
    }
    await eventually(
      async () => (receivers.reduce((sum, r) => sum + r.closed(), 0) >= closedAtStart + 3 * quarter ? true : undefined),
      'more attempts to the hanging receivers failed meanwhile',
      60_000,
    );
    assert.ok(maxOpen <= quarter, `the hanging receivers held ${maxOpen} connections at once (at most ${quarter})`);
  } finally {
    clearInterval(pressure);
    for (const r of receivers) await r.stop();
    await dispatcher.drain();
    await sender.close();
  }
});
