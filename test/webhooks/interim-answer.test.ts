import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type AddressInfo, type Socket, createServer } from 'node:net';
import { describe, test, type TestContext } from 'node:test';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import { addWebhook, deliveryHarness, eventually } from './delivery-harness.js';

// "An interim 1xx answer before the final one is accepted (RFC
// 9110 §15.2)": the final status counts. undici 7's HTTP/1.1 client destroyed the connection on a
// 100 Continue ("bad response"), so such a receiver's 200 was recorded as a failure and sent again.
// The receivers here are raw TCP servers on 127.0.0.1, since node:http's server writes no interim
// answer that its client did not ask for.

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];
const FINAL = 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok';

const INTERIMS: Array<[string, string]> = [
  ['100 Continue', 'HTTP/1.1 100 Continue\r\n\r\n'],
  ['102 Processing', 'HTTP/1.1 102 Processing\r\n\r\n'],
  ['103 Early Hints with headers', 'HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\n\r\n'],
  ['100 Continue, then 103 Early Hints', 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n'],
];

interface RawReceiver {
  readonly url: string;
  /** Requests received whole (head and content-length body). */
  requests: number;
  /** TCP connections accepted. */
  connections: number;
}

/**
 * A receiver on 127.0.0.1 that answers each whole request (keep-alive: several on one connection)
 * with `interim`, written on its own, then `final` (the 200 `ok`).
 */
async function rawReceiver(t: TestContext, interim: string, final = FINAL): Promise<RawReceiver> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    receiver.connections++;
    sockets.add(socket);
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = pending.subarray(0, end).toString('latin1');
        const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (pending.length < end + 4 + length) return;
        pending = pending.subarray(end + 4 + length);
        receiver.requests++;
        socket.write(interim);
        socket.write(final);
      }
    });
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const receiver: RawReceiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks/plants`,
    requests: 0,
    connections: 0,
  };
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    server.close();
    await once(server, 'close');
  });
  return receiver;
}

interface DeliveryJson {
  id: string;
  status: string;
  attempts: number;
  lastStatus: number | null;
}

describe('an interim 1xx answer before the final one is accepted (RFC 9110 §15.2)', () => {
  for (const [what, interim] of INTERIMS) {
    test(`${what} then 200: delivered at the first attempt, the attempt records 200`, async (t) => {
      // One attempt: a 1xx taken for a failure shows at once as `failed`, not as a retry to wait for.
      const h = await deliveryHarness(t, [0]);
      const receiver = await rawReceiver(t, interim);
      const alice = await h.token('alice', SCOPES);
      const id = await addWebhook(h, alice, receiver.url);
      h.dispatcher.start();
      const created = await h.call(alice, { method: 'POST', url: '/plants', ...json(plantBody('1', 'Fern')) });
      assert.equal(created.statusCode, 200, created.payload);
      h.dispatcher.wake();

      const delivery = await eventually(async () => {
        const res = await h.call(alice, { method: 'GET', url: `/webhooks/${id}/deliveries` });
        const [only] = JSON.parse(res.payload.replace(/"id":(\d+)/g, '"id":"$1"')) as DeliveryJson[];
        return only !== undefined && only.status !== 'pending' ? only : undefined;
      }, 'the delivery settled');
      assert.deepEqual([delivery.status, delivery.attempts, delivery.lastStatus], ['delivered', 1, 200]);
      const res = await h.call(alice, { method: 'GET', url: `/webhooks/${id}/deliveries/${delivery.id}/attempts` });
      const log = JSON.parse(res.payload) as Array<{ status: number | null; error: string | null; response: string }>;
      assert.deepEqual(
        log.map((a) => [a.status, a.error, a.response]),
        [[200, null, 'ok']],
      );
      assert.equal(receiver.requests, 1, 'sent once');
    });
  }

  test('the sender reports the final status and answer, and reuses the connection after it', async (t) => {
    const receiver = await rawReceiver(t, INTERIMS[3]![1]);
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 5000 });
    t.after(() => sender.close());
    const request = { url: receiver.url, headers: { 'content-type': 'application/json' }, body: '{"id":1}' };
    for (const _ of [1, 2]) {
      const result = await sender.send(request);
      assert.deepEqual([result.status, result.error, result.responseSnippet], [200, undefined, 'ok']);
    }
    assert.deepEqual([receiver.requests, receiver.connections], [2, 1]);
  });

  // Not an interim answer: 101 switches protocols, which a webhook never asks for. node:http then
  // drops the connection without an error event; the attempt must still end, as a failure.
  test('a 101 that no upgrade asked for fails the attempt instead of holding it', { timeout: 10_000 }, async (t) => {
    const upgrade = 'HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n';
    const receiver = await rawReceiver(t, upgrade, '');
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 5000 });
    t.after(() => sender.close());
    const result = await sender.send({ url: receiver.url, headers: {}, body: '{"id":1}' });
    assert.deepEqual([result.status, result.error], [undefined, 'connection closed by the receiver']);
    assert.equal(receiver.requests, 1);
  });
});

describe('what a hostile receiver found', () => {
  test('an endless stream of 100 Continue fails the attempt after 10 interim answers, instead of holding the event loop for its 10 s', async (t) => {
    const sockets = new Set<Socket>();
    const server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.once('data', () => {
        const flood = Buffer.from('HTTP/1.1 100 Continue\r\n\r\n'.repeat(1000));
        const pour = (): void => {
          while (!socket.destroyed && socket.write(flood));
          if (!socket.destroyed) socket.once('drain', pour);
        };
        pour();
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      server.close();
    });
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 10_000 });
    t.after(() => sender.close());
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/flood`;
    const attempt = await sender.send({ url, headers: {}, body: '{}' });
    assert.equal(attempt.status, undefined);
    assert.equal(attempt.error, 'more than 10 interim (1xx) answers before the final one');
  });

  test('one subject’s hanging deliveries to a host do not hold the connections another subject’s deliveries to the same host need', async (t) => {
    const held: Socket[] = [];
    /** How many of mallory's connections were still open when alice's delivery reached the host. */
    let heldWhenAliceArrived: number | undefined;
    const server = createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', (chunk: Buffer) => {
        // /slow never answers; anything else gets its 204 at once.
        if (chunk.toString('latin1').startsWith('POST /slow')) return void held.push(socket);
        heldWhenAliceArrived = held.filter((s) => !s.destroyed).length;
        socket.end('HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n');
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => {
      for (const socket of held) socket.destroy();
      server.close();
    });
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // Two connections per origin and subject: mallory's two hanging deliveries fill her share.
    const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 10_000, connectionsPerOrigin: 2 });
    const hanging = Array.from({ length: 2 }, () =>
      sender.send({ url: `${origin}/slow`, headers: {}, body: '{}', subject: 'mallory' }),
    );
    await eventually(async () => (held.length === 2 ? true : undefined), 'mallory’s two connections held');
    const alice = await sender.send({ url: `${origin}/alice`, headers: {}, body: '{}', subject: 'alice' });
    assert.deepEqual([alice.status, alice.error], [204, undefined]);
    // Shared pools made alice's delivery wait for a connection of mallory's to end (their timeout).
    assert.equal(heldWhenAliceArrived, 2, 'alice was sent beside mallory’s hanging connections, not after them');
    for (const socket of held) socket.destroy();
    await Promise.all(hanging);
    await sender.close();
  });
});
