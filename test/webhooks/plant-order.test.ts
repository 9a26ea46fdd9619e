import assert from 'node:assert/strict';
import { test } from 'node:test';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import { type DeliveryHarness, type Request, TestReceiver, deliveryHarness, eventually } from './delivery-harness.js';

// Order per plant (docs/api.md#delivery): to one webhook, a delivery is not attempted while an
// earlier delivery of the same plant is neither delivered nor failed; other plants' deliveries are
// not held back. A real dispatcher and a receiver on 127.0.0.1, on the engine under test.

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];
const HOUR = 3_600_000;

interface Seen {
  readonly type: string;
  readonly plant: string;
  readonly status: number;
}

/** What the receiver was sent, in order: the event type, the plant's id as written, the answer given. */
const seen = (requests: readonly Request[], answers: readonly number[]): Seen[] =>
  requests.map((r, i) => ({
    type: String(r.headers['plant-store-event']),
    plant: /"id":(\d+)/.exec(r.body)![1]!,
    status: answers[i]!,
  }));

interface DeliveryJson {
  id: string;
  type: string;
  eventId: string;
  status: string;
  attempts: number;
}

async function deliveries(h: DeliveryHarness, token: string, webhook: string): Promise<DeliveryJson[]> {
  const res = await h.call(token, { method: 'GET', url: `/webhooks/${webhook}/deliveries?limit=100` });
  assert.equal(res.statusCode, 200, res.payload);
  return JSON.parse(res.payload.replace(/"(id|eventId)":(\d+)/g, '"$1":"$2"')) as DeliveryJson[];
}

async function call(h: DeliveryHarness, token: string, method: 'POST' | 'DELETE', url: string, body?: string) {
  const res = await h.call(token, { method, url, ...(body === undefined ? {} : json(body)) });
  assert.ok([200, 201, 202, 204].includes(res.statusCode), `${res.statusCode} ${res.payload}`);
  h.dispatcher.wake();
  return res;
}

test('a create that fails twice is delivered before its delete; other plants are not held back', async (t) => {
  const h = await deliveryHarness(t, [0, HOUR, HOUR, HOUR]);
  const receiver = await new TestReceiver().start(t);
  // The first two attempts of plant 1's create are refused; every other request is delivered.
  const answers: number[] = [];
  let refusals = 2;
  receiver.answer = (r) => {
    const refuse = r.headers['plant-store-event'] === 'plant.created' && r.body.includes('"id":1,') && refusals-- > 0;
    answers.push(refuse ? 500 : 204);
    return { status: refuse ? 500 : 204 };
  };
  const alice = await h.token('alice', SCOPES);
  const webhook = (
    JSON.parse((await call(h, alice, 'POST', '/webhooks', JSON.stringify({ url: receiver.url }))).payload) as {
      id: string;
    }
  ).id;
  h.dispatcher.start();

  await call(h, alice, 'POST', '/plants', plantBody('1', 'fern'));
  await eventually(async () => (answers.length >= 1 ? true : undefined), "plant 1's create, refused");
  await call(h, alice, 'DELETE', '/plants/1');
  await call(h, alice, 'POST', '/plants', plantBody('2', 'moss'));
  await call(h, alice, 'DELETE', '/plants/2');
  await call(h, alice, 'POST', '/plants', plantBody('3', 'ivy'));

  // Plant 2's create and delete, and plant 3's create, all committed after plant 1's delete, are
  // delivered while plant 1's delete waits behind its create's retry, an hour away.
  await eventually(async () => (answers.length >= 4 ? true : undefined), "the other plants' deliveries");
  assert.deepEqual(seen(receiver.requests, answers), [
    { type: 'plant.created', plant: '1', status: 500 },
    { type: 'plant.created', plant: '2', status: 204 },
    { type: 'plant.deleted', plant: '2', status: 204 },
    { type: 'plant.created', plant: '3', status: 204 },
  ]);
  // The refusal's record may follow the receiver's answer by a moment.
  const waiting = await eventually(async () => {
    const listed = await deliveries(h, alice, webhook);
    return listed.at(-1)!.attempts === 1 ? listed : undefined;
  }, "plant 1's create's first attempt recorded");
  const deleted1 = waiting.find((d) => d.type === 'plant.deleted' && d.status === 'pending');
  assert.ok(deleted1, `plant 1's delete is pending: ${JSON.stringify(waiting)}`);
  assert.equal(deleted1.attempts, 0, "plant 1's delete is not attempted while its create is pending");
  const created1 = waiting.at(-1)!;
  assert.deepEqual([created1.type, created1.status, created1.attempts], ['plant.created', 'pending', 1]);

  // Its owner asks for the retry now: refused again, the delete still waits; asked again, delivered,
  // and the delete follows.
  const retry = async (): Promise<void> => {
    const res = await call(h, alice, 'POST', `/webhooks/${webhook}/deliveries/${created1.id}/retry`);
    assert.equal(res.statusCode, 202, res.payload);
  };
  await retry();
  await eventually(async () => (answers.length >= 5 ? true : undefined), "plant 1's create, refused again");
  await eventually(async () => {
    const [d] = (await deliveries(h, alice, webhook)).filter((x) => x.id === created1.id);
    return d!.attempts === 2 ? true : undefined;
  }, 'the second attempt recorded');
  assert.equal(answers.length, 5, "plant 1's delete waits behind its create's second refusal");
  await retry();
  await eventually(async () => (answers.length >= 7 ? true : undefined), "plant 1's create and delete");
  assert.deepEqual(seen(receiver.requests, answers).slice(4), [
    { type: 'plant.created', plant: '1', status: 500 },
    { type: 'plant.created', plant: '1', status: 204 },
    { type: 'plant.deleted', plant: '1', status: 204 },
  ]);
  await eventually(async () => {
    const done = await deliveries(h, alice, webhook);
    return done.length === 5 && done.every((d) => d.status === 'delivered') ? true : undefined;
  }, 'every delivery recorded as delivered');
  // Every event id once, and plant 1's in event order.
  assert.equal(new Set(receiver.requests.map((r) => r.headers['webhook-id'])).size, 5);
});

test("a failed delivery holds nothing back: the plant's later events go on", async (t) => {
  const h = await deliveryHarness(t, [0]); // one attempt: a refusal fails the delivery for good
  const receiver = await new TestReceiver().start(t);
  const answers: number[] = [];
  receiver.answer = (r) => {
    const refuse = r.headers['plant-store-event'] === 'plant.created';
    answers.push(refuse ? 500 : 204);
    return { status: refuse ? 500 : 204 };
  };
  const alice = await h.token('alice', SCOPES);
  const webhook = (
    JSON.parse((await call(h, alice, 'POST', '/webhooks', JSON.stringify({ url: receiver.url }))).payload) as {
      id: string;
    }
  ).id;
  h.dispatcher.start();
  await call(h, alice, 'POST', '/plants', plantBody('7', 'fern'));
  await eventually(async () => (answers.length >= 1 ? true : undefined), "plant 7's create");
  await call(h, alice, 'DELETE', '/plants/7');
  await eventually(async () => (answers.length >= 2 ? true : undefined), "plant 7's delete");
  assert.deepEqual(seen(receiver.requests, answers), [
    { type: 'plant.created', plant: '7', status: 500 },
    { type: 'plant.deleted', plant: '7', status: 204 },
  ]);
  // The receiver has answered; the delete's record follows.
  const expected = JSON.stringify([
    ['plant.deleted', 'delivered'],
    ['plant.created', 'failed'],
  ]);
  let listed = '';
  await eventually(async () => {
    listed = JSON.stringify((await deliveries(h, alice, webhook)).map((d) => [d.type, d.status]));
    return listed === expected ? true : undefined;
  }, 'the deliveries recorded').catch(() => assert.equal(listed, expected));
});
