import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { describe, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../../src/store/store.js';
import type { AttemptOutcome } from '../../src/store/webhook-store.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import {
  type Answer,
  type DeliveryHarness,
  TestReceiver,
  addWebhook,
  deliveryHarness,
  eventually,
} from './delivery-harness.js';

// A receiver's answer is recorded whatever its bytes, and a
// failure to record an attempt's details never leaves a delivery to be sent again and again. Before
// the fix, a 200 whose body held a NUL could not be recorded on PostgreSQL (a text column refuses
// U+0000): the delivery stayed pending with 0 attempts and was sent again each time its lease ran
// out, for ever. Both engines (test/postgres/webhooks.test.ts runs this folder again there).

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

interface DeliveryJson {
  id: string;
  status: string;
  attempts: number;
  lastStatus: number | null;
}

interface AttemptJson {
  attempt: number;
  status: number | null;
  error: string | null;
  response: string | null;
}

async function setup(t: Parameters<typeof deliveryHarness>[0], answer: Answer, schedule?: readonly number[]) {
  const h = await deliveryHarness(t, schedule);
  const receiver = await new TestReceiver().start(t);
  receiver.answer = () => answer;
  const alice = await h.token('alice', SCOPES);
  return { h, receiver, alice, id: await addWebhook(h, alice, receiver.url) };
}

async function createPlant(h: DeliveryHarness, token: string, id: string): Promise<void> {
  const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(id, `plant ${id}`)) });
  assert.equal(res.statusCode, 200, res.payload);
  h.dispatcher.wake();
}

async function deliveries(h: DeliveryHarness, token: string, id: string): Promise<DeliveryJson[]> {
  const res = await h.call(token, { method: 'GET', url: `/webhooks/${id}/deliveries` });
  assert.equal(res.statusCode, 200, res.payload);
  return JSON.parse(res.payload.replace(/"id":(\d+)/g, '"id":"$1"')) as DeliveryJson[];
}

async function attempts(h: DeliveryHarness, token: string, id: string, deliveryId: string): Promise<AttemptJson[]> {
  const res = await h.call(token, { method: 'GET', url: `/webhooks/${id}/deliveries/${deliveryId}/attempts` });
  assert.equal(res.statusCode, 200, res.payload);
  return JSON.parse(res.payload) as AttemptJson[];
}

/** The one delivery, once it is no longer pending. */
const settled = (h: DeliveryHarness, token: string, id: string): Promise<DeliveryJson> =>
  eventually(async () => {
    const [only] = await deliveries(h, token, id);
    return only !== undefined && only.status !== 'pending' ? only : undefined;
  }, 'the delivery settled');

const ANSWERS: Array<[string, Buffer, string]> = [
  ['ok and a NUL', Buffer.from('ok\u0000'), 'ok\uFFFD'],
  ['UTF-16 (a NUL every other byte)', Buffer.from('\uFEFFok', 'utf16le'), '\uFFFD\uFFFDo\uFFFDk\uFFFD'],
  ['invalid UTF-8', Buffer.from([0x6f, 0x6b, 0xc3, 0x28, 0xff]), 'ok\uFFFD(\uFFFD'],
];

describe("a receiver's answer is recorded whatever its bytes", () => {
  for (const [what, body, recorded] of ANSWERS) {
    test(`200 with ${what}: delivered at the first attempt, the answer stored as text`, async (t) => {
      const { h, receiver, alice, id } = await setup(t, { status: 200, body });
      h.dispatcher.start();
      await createPlant(h, alice, '1');
      const delivery = await settled(h, alice, id);
      assert.deepEqual([delivery.status, delivery.attempts, delivery.lastStatus], ['delivered', 1, 200]);
      const log = await attempts(h, alice, id, delivery.id);
      assert.deepEqual(
        log.map((a) => [a.attempt, a.status, a.error, a.response]),
        [[1, 200, null, recorded]],
      );
      assert.equal(receiver.requests.length, 1, 'sent once');
      assert.deepEqual(h.dispatcherWarnings, []);
    });
  }

  test('gzip bytes: stored as text with no NUL', async (t) => {
    const { h, alice, id } = await setup(t, { status: 200, body: gzipSync('{"ok":true}') });
    h.dispatcher.start();
    await createPlant(h, alice, '1');
    const delivery = await settled(h, alice, id);
    assert.equal(delivery.status, 'delivered');
    const [only] = await attempts(h, alice, id, delivery.id);
    assert.ok(only!.response !== null && only!.response.length > 0);
    assert.ok(!only!.response.includes('\u0000'), JSON.stringify(only!.response));
  });

  test('500 with a NUL: each attempt is counted, and the delivery fails on its schedule', async (t) => {
    const { h, receiver, alice, id } = await setup(t, { status: 500, body: Buffer.from('no\u0000') }, [0, 0]);
    h.dispatcher.start();
    await createPlant(h, alice, '1');
    const delivery = await settled(h, alice, id);
    assert.deepEqual([delivery.status, delivery.attempts, delivery.lastStatus], ['failed', 2, 500]);
    const log = await attempts(h, alice, id, delivery.id);
    assert.deepEqual(
      log.map((a) => [a.attempt, a.status, a.response]),
      [
        [2, 500, 'no\uFFFD'],
        [1, 500, 'no\uFFFD'],
      ],
    );
    assert.equal(receiver.requests.length, 2);
  });
});

describe("a failure to record an attempt's details still counts the attempt", () => {
  /**
   * The store under test, whose records refuse any attempt with the receiver's answer, as
   * PostgreSQL refused one with a NUL: the dispatcher must then record the outcome without it.
   */
  function refusingDetails(store: Store, refused: AttemptOutcome[]): Store {
    return new Proxy(store, {
      get(target, name) {
        if (name === 'recordAttempt') {
          return async (id: bigint, holder: string, o: AttemptOutcome) => {
            if (o.response !== null) {
              refused.push(o);
              throw new Error('invalid byte sequence for encoding "UTF8": 0x00');
            }
            return target.recordAttempt(id, holder, o);
          };
        }
        const value = Reflect.get(target, name, target) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  for (const [status, schedule, outcome] of [
    [200, [0, 60_000], 'delivered'],
    [500, [0, 0], 'failed'],
  ] as const) {
    test(`a ${status} whose record fails is recorded without its details: ${outcome}, never sent again`, async (t) => {
      const { h, receiver, alice, id } = await setup(t, { status, body: 'answer' }, schedule);
      const refused: AttemptOutcome[] = [];
      const warnings: Array<Record<string, unknown>> = [];
      const log = {
        warn: (fields: Record<string, unknown>, msg: string) => warnings.push({ ...fields, msg }),
        info: () => {},
        error: () => {},
        debug: () => {},
      } as unknown as FastifyBaseLogger;
      const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 5000 });
      const dispatcher = new Dispatcher(
        refusingDetails(h.store, refused),
        sender,
        new SecretBox(null),
        h.settings,
        log,
        undefined,
        () => h.now(),
      );
      // Stopped before the harness closes the store (its after-hook was registered first).
      try {
        dispatcher.start();
        const res = await h.call(alice, { method: 'POST', url: '/plants', ...json(plantBody('1', 'Fern')) });
        assert.equal(res.statusCode, 200);
        dispatcher.wake();
        const delivery = await settled(h, alice, id);
        assert.deepEqual(
          [delivery.status, delivery.attempts, delivery.lastStatus],
          [outcome, schedule.length === 2 && status === 500 ? 2 : 1, status],
        );
        assert.equal(receiver.requests.length, delivery.attempts, 'one request an attempt');
        assert.equal(refused.length, delivery.attempts, 'each record with details was refused');
        const recorded = await attempts(h, alice, id, delivery.id);
        assert.ok(
          recorded.every((a) => a.status === status && a.response === null),
          JSON.stringify(recorded),
        );
        if (status === 500) {
          assert.ok(
            recorded.every(
              (a) => a.error === "the receiver answered 500; this attempt's details could not be recorded",
            ),
          );
        }
        assert.ok(
          warnings.some(
            (w) =>
              w.msg === "webhook dispatcher: an attempt's details could not be recorded; its outcome is, without them",
          ),
          JSON.stringify(warnings),
        );
      } finally {
        await dispatcher.drain();
        await sender.close();
      }
    });
  }
});
