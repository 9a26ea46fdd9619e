import assert from 'node:assert/strict';
import { test } from 'node:test';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import { type DeliveryHarness, TestReceiver, addWebhook, deliveryHarness, eventually } from './delivery-harness.js';

// POST /webhooks/{id}/recover also sends what a paused or
// disabled webhook was not sent: each event of its subject and types committed at or after
// `since` with no delivery to this webhook gets one, in event order, beside the failed ones
// requeued: {"requeued", "created"}. Resuming and recovering the pause are two calls. Both engines
// (test/postgres/webhooks.test.ts runs this folder again there).

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

async function call(h: DeliveryHarness, token: string, method: string, url: string, body?: unknown) {
  const res = await h.call(token, {
    method: method,
    url,
    ...(body === undefined ? {} : json(JSON.stringify(body))),
  });
  return { status: res.statusCode, body: res.payload === '' ? undefined : (JSON.parse(res.payload) as unknown) };
}

async function create(h: DeliveryHarness, token: string, id: string, name: string, tag?: string): Promise<void> {
  const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(id, name, tag)) });
  assert.equal(res.statusCode, 200, res.payload);
}

/** The ids of the plants whose events the receiver got, in the order it got them. */
const receivedIds = (receiver: TestReceiver): string[] =>
  receiver.requests.map((r) => /"id":(\d+)/.exec(r.body)?.[1] ?? r.body);

test('the events of a pause are sent by recover after enable, in event order, once; the webhook’s own subject and types only', async (t) => {
  const h = await deliveryHarness(t);
  const receiver = await new TestReceiver().start(t);
  const alice = await h.token('alice', SCOPES);
  const bob = await h.token('bob', SCOPES);
  const started = new Date(h.now() - 1000).toISOString();
  const id = await addWebhook(h, alice, receiver.url);
  // Only plant.created: a deletion in the pause is not the webhook's to get.
  assert.equal((await call(h, alice, 'PATCH', `/webhooks/${id}`, { events: ['plant.created'] })).status, 200);
  h.dispatcher.start();
  await create(h, alice, '1', 'before');
  h.dispatcher.wake();
  await eventually(async () => (receiver.requests.length === 1 ? true : undefined), 'the first event delivered');

  assert.equal((await call(h, alice, 'PATCH', `/webhooks/${id}`, { status: 'disabled' })).status, 200);
  await create(h, alice, '2', 'paused one');
  await create(h, bob, '3', 'bob’s'); // another subject's: never this webhook's
  await create(h, alice, '4', 'paused two');
  assert.equal((await call(h, alice, 'DELETE', '/plants/2')).status, 204); // a type it does not take
  await create(h, alice, '5', 'paused three');
  h.dispatcher.wake();
  // Nothing of the pause is sent, and enabling does not send it either.
  assert.equal((await call(h, alice, 'POST', `/webhooks/${id}/enable`)).status, 200);
  await create(h, alice, '6', 'after');
  h.dispatcher.wake();
  await eventually(async () => (receiver.requests.length === 2 ? true : undefined), 'the event after the enable');
  assert.deepEqual(receivedIds(receiver), ['1', '6']);

  // Recover the pause: 3 deliveries made (plants 2, 4, 5), in event order, nothing requeued.
  const recovered = await call(h, alice, 'POST', `/webhooks/${id}/recover`, { since: started });
  assert.equal(recovered.status, 202);
  assert.deepEqual(recovered.body, { requeued: 0, created: 3 });
  h.dispatcher.wake();
  await eventually(async () => (receiver.requests.length === 5 ? true : undefined), 'the pause delivered');
  assert.deepEqual(receivedIds(receiver), ['1', '6', '2', '4', '5']);
  // The receiver has each request before the service records its answer: wait for the records.
  const deliveries = await eventually(async () => {
    const listed = (await call(h, alice, 'GET', `/webhooks/${id}/deliveries`)).body as Array<{ status: string }>;
    return listed.every((d) => d.status === 'delivered') ? listed : undefined;
  }, 'every delivery recorded as delivered');
  assert.equal(deliveries.length, 5);
  // Each event once: a second recover finds nothing to make.
  assert.deepEqual((await call(h, alice, 'POST', `/webhooks/${id}/recover`, { since: started })).body, {
    requeued: 0,
    created: 0,
  });
});

test('recover honours since, and never makes deliveries for events before the webhook existed', async (t) => {
  const h = await deliveryHarness(t);
  const receiver = await new TestReceiver().start(t);
  const alice = await h.token('alice', SCOPES);
  const long = new Date(h.now() - 3_600_000).toISOString();
  await create(h, alice, '1', 'before the webhook');
  await new Promise((resolve) => setTimeout(resolve, 20)); // its event is older than the webhook, on either clock
  const id = await addWebhook(h, alice, receiver.url);
  assert.equal((await call(h, alice, 'PATCH', `/webhooks/${id}`, { status: 'disabled' })).status, 200);
  await create(h, alice, '2', 'early in the pause');
  await new Promise((resolve) => setTimeout(resolve, 20)); // two distinct milliseconds on either clock
  const midway = new Date(h.now()).toISOString();
  await new Promise((resolve) => setTimeout(resolve, 20));
  await create(h, alice, '3', 'late in the pause');
  // While still disabled: the deliveries are made and wait for the enable (a disabled webhook is sent nothing).
  const recovered = await call(h, alice, 'POST', `/webhooks/${id}/recover`, { since: midway });
  assert.deepEqual(recovered.body, { requeued: 0, created: 1 });
  h.dispatcher.start();
  h.dispatcher.wake();
  assert.equal((await call(h, alice, 'POST', `/webhooks/${id}/enable`)).status, 200);
  h.dispatcher.wake();
  await eventually(async () => (receiver.requests.length === 1 ? true : undefined), 'the late one delivered');
  assert.deepEqual(receivedIds(receiver), ['3']);
  // From long ago: plant 2 only (plant 1 came before the webhook; plant 3 has its delivery).
  assert.deepEqual((await call(h, alice, 'POST', `/webhooks/${id}/recover`, { since: long })).body, {
    requeued: 0,
    created: 1,
  });
  h.dispatcher.wake();
  await eventually(async () => (receiver.requests.length === 2 ? true : undefined), 'the early one delivered');
  assert.deepEqual(receivedIds(receiver), ['3', '2']);
});
