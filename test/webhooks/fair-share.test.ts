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

// One subject whose receivers hang holds at most its
// own share of a process's in-flight deliveries, and another subject's deliveries keep their
// latency. Before the fix, subject M's hanging webhooks took all 256 slots of a process (32 each,
// the webhooks walked from the first id at every claim), and subject A's delivery waited until M's
// attempts timed out. Proven by order, not by a clock: A's delivery arrives while every one of M's
// attempts is still out (none has ended, none is recorded), so it waited for none of them. Both
// engines (test/postgres/webhooks.test.ts runs this folder again there).

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

type Harness = Awaited<ReturnType<typeof deliveryHarness>>;

const quiet = { warn: () => {}, info: () => {}, error: () => {}, debug: () => {} } as unknown as FastifyBaseLogger;

/** A dispatcher of the harness's store with these shares, its sender giving up after `timeoutMs`. */
function dispatcherOf(h: Harness, settings: Harness['settings'], timeoutMs: number) {
  const sender = new WebhookSender({ allowPrivate: true, timeoutMs, connectionsPerOrigin: 256 });
  const dispatcher = new Dispatcher(h.store, sender, new SecretBox(null), settings, quiet, undefined, () => h.now());
  return { sender, dispatcher };
}

/** Creates a plant as `token`'s subject, ids 1, 2, 3… in turn, each answered 200. */
function plantsOf(h: Harness): (token: string) => Promise<void> {
  let next = 1;
  return async (token) => {
    const id = next++;
    const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(String(id), `plant ${id}`)) });
    assert.equal(res.statusCode, 200, res.payload);
  };
}

/**
 * A receiver that accepts every connection and never answers; `onOpen`/`onClose` hear of each. The
 * first `answerFirst` requests are answered 204 (and their connection closed), the rest hang.
 */
async function hangingReceiver(
  t: Parameters<typeof deliveryHarness>[0],
  onOpen: (socket: Socket) => void = () => {},
  onClose: (socket: Socket) => void = () => {},
  answerFirst = 0,
) {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let closed = 0;
  let answered = 0;
  const server = createServer((socket) => {
    const answer = accepted < answerFirst;
    accepted++;
    sockets.add(socket);
    onOpen(socket);
    socket.on('close', () => {
      closed++;
      sockets.delete(socket);
      onClose(socket);
    });
    socket.on('error', () => {});
    if (!answer) {
      socket.resume(); // read and drop the request: a client that gives up is then seen closing
      return;
    }
    // Read the whole request (headers and Content-Length bytes of body), then answer and close.
    let read = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      read = Buffer.concat([read, chunk]);
      const end = read.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(read.subarray(0, end).toString('latin1'))?.[1] ?? 0);
      if (read.length < end + 4 + length) return;
      answered++;
      socket.end('HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n');
    });
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
  return {
    url,
    accepted: () => accepted,
    answered: () => answered,
    closed: () => closed,
    open: () => new Set(sockets),
    stop,
  };
}

test("a subject's hanging receivers hold at most its share; another subject's delivery does not wait for them", async (t) => {
  const h = await deliveryHarness(t);
  // Mallory's receiver answers its first 20 requests, then hangs: its webhooks and its origin are
  // known to answer (without that, the newcomers' slow start keeps each of them to one delivery
  // in flight, and the subject's share is never reached), and then they all hang at once.
  const hanging = await hangingReceiver(t, undefined, undefined, 20);
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
  const settings = { ...h.settings, maxInFlight: 256, maxInFlightPerWebhook: 32, maxInFlightPerSubject: 64 };
  // Attempts that end only after the test (a minute): every one of mallory's stays out meanwhile.
  const { sender, dispatcher } = dispatcherOf(h, settings, 60_000);
  await create(m, 1);
  dispatcher.start();
  try {
    await eventually(
      async () => (hanging.answered() === 20 && hanging.open().size === 0 ? true : undefined),
      () =>
        `mallory's first plant delivered to each of its webhooks (${hanging.answered()} answered, ${hanging.accepted()} accepted, ${hanging.open().size} open)`,
      30_000,
    );
    // 15 plants of mallory's: 300 deliveries due, more than a process's 256 slots.
    for (let id = 2; id <= 16; id++) await create(m, id);
    dispatcher.wake();
    await eventually(
      async () => (hanging.open().size >= settings.maxInFlightPerSubject ? true : undefined),
      () => `mallory's share of attempts out (${hanging.open().size} connections)`,
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
    const deliveries = JSON.parse(records.payload) as Array<{ attempts: number; status: string }>;
    assert.equal(deliveries.length, 16);
    assert.deepEqual(
      deliveries.map((d) => [d.status, d.attempts]),
      [...Array.from({ length: 15 }, () => ['pending', 0]), ['delivered', 1]],
      'no attempt of mallory is recorded since its first plant',
    );
    // Mallory holds at most its share of the process's slots, whatever its 20 webhooks' shares add up to.
    const out = hanging.accepted() - hanging.answered();
    assert.ok(out <= settings.maxInFlightPerSubject, `${out} of mallory's attempts out`);
    assert.ok(alices.startsWith('wh_'));
  } finally {
    // Before the harness closes the store (its after-hook was registered first): the hanging
    // receiver's sockets destroyed, the attempts still out end, and the dispatcher drains.
    await hanging.stop();
    await dispatcher.drain();
    await sender.close();
  }
});

// The webhooks axis of bench:scale: with many subjects' receivers hanging at once, each
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
  const create = plantsOf(h);
  for (let round = 0; round < 4; round++) for (const token of hangers) await create(token);

  // Attempts to a hanging receiver end after 300 ms, as failures.
  const { sender, dispatcher } = dispatcherOf(h, settings, 300);
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

// The slow start: a webhook whose receiver this process has not yet heard answer (a
// newcomer) gets one delivery in flight, and the newcomers together at most a quarter of the
// process, so receivers that hang from the start cost one slot each for one timeout before they
// are known, not their webhook's or subject's share. Before it, ten such webhooks of five subjects
// took every one of the 16 slots (4 each, 4 a subject) on their first claim, and a subject whose
// receiver answers waited for their timeouts. Proven by order: alice's deliveries arrive while not
// one hanging attempt has ended (the timeout is a minute), and at most a quarter were ever open.
test('webhooks whose receivers hang from the start hold one delivery each, a quarter of the process together; a receiver that answered is not held back', async (t) => {
  const h = await deliveryHarness(t);
  const settings = { ...h.settings, maxInFlight: 16, maxInFlightPerWebhook: 4, maxInFlightPerSubject: 4 };
  const quarter = settings.maxInFlight / 4;
  let open = 0;
  let maxOpen = 0;
  const receivers: Array<Awaited<ReturnType<typeof hangingReceiver>>> = [];
  for (let i = 0; i < 10; i++) {
    receivers.push(
      await hangingReceiver(
        t,
        () => void (maxOpen = Math.max(maxOpen, ++open)),
        () => void open--,
      ),
    );
  }
  const healthy = await new TestReceiver().start(t);
  const alice = await h.token('alice', SCOPES);
  await addWebhook(h, alice, healthy.url);
  const create = plantsOf(h);
  const { sender, dispatcher } = dispatcherOf(h, settings, 60_000);
  dispatcher.start();
  try {
    // Alice's receiver answers once: it is known.
    await create(alice);
    await eventually(async () => (healthy.requests.length === 1 ? true : undefined), "alice's first delivery", 30_000);
    // Five subjects of two webhooks each, every receiver hanging, four plants each: 40 deliveries due.
    const hangers: string[] = [];
    for (let s = 0; s < 5; s++) {
      const token = await h.token(`hanger${s}`, SCOPES);
      hangers.push(token);
      for (const i of [2 * s, 2 * s + 1]) await addWebhook(h, token, receivers[i]!.url);
    }
    for (let round = 0; round < 4; round++) for (const token of hangers) await create(token);
    dispatcher.wake();
    await eventually(
      async () => (open >= quarter ? true : undefined),
      () => `the newcomers' quarter out (${open} open)`,
      30_000,
    );
    for (let i = 2; i <= 6; i++) {
      await create(alice);
      dispatcher.wake();
      await eventually(
        async () => (healthy.requests.length === i ? true : undefined),
        () => `alice's delivery ${i} (${healthy.requests.length} arrived)`,
        30_000,
      );
    }
    const closed = receivers.reduce((sum, r) => sum + r.closed(), 0);
    assert.equal(closed, 0, 'no hanging attempt ended: alice waited for none');
    assert.equal(maxOpen, quarter, `the hanging receivers held ${maxOpen} connections at once (a quarter: ${quarter})`);
    assert.deepEqual(
      receivers.map((r) => r.accepted()).filter((n) => n > 1),
      [],
      'one delivery in flight to each newcomer',
    );
  } finally {
    for (const r of receivers) await r.stop();
    await dispatcher.drain();
    await sender.close();
  }
});
