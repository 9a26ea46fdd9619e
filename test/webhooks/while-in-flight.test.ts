import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type ServerResponse, createServer } from 'node:http';
import { test } from 'node:test';
import { json } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';
import { type DeliveryHarness, TestReceiver, addWebhook, deliveryHarness, eventually } from './delivery-harness.js';

// A retry asked for while an attempt is on the wire is
// not lost, and enabling a webhook that is already active changes nothing. Both engines
// (test/postgres/webhooks.test.ts runs this folder again there).

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];

interface DeliveryJson {
  id: string;
  status: string;
  attempts: number;
}

async function deliveries(h: DeliveryHarness, token: string, id: string): Promise<DeliveryJson[]> {
  const res = await h.call(token, { method: 'GET', url: `/webhooks/${id}/deliveries` });
  assert.equal(res.statusCode, 200, res.payload);
  return JSON.parse(res.payload.replace(/"id":(\d+)/g, '"id":"$1"')) as DeliveryJson[];
}

test('a retry asked for while the attempt is on the wire is sent once that attempt ends, whatever it answered', async (t) => {
  // The schedule's next attempt is 10 minutes away: only the retry can send it again within the test.
  const h = await deliveryHarness(t, [0, 600_000]);
  const held: ServerResponse[] = [];
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    // The first attempt waits for the test to let it answer 500; the next ones are answered at once.
    if (requests === 1) held.push(res);
    else res.writeHead(204).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  const alice = await h.token('alice', SCOPES);
  const id = await addWebhook(h, alice, `http://127.0.0.1:${(server.address() as { port: number }).port}/hook`);
  h.dispatcher.start();
  const created = await h.call(alice, { method: 'POST', url: '/plants', ...json(plantBody('1', 'Fern')) });
  assert.equal(created.statusCode, 200);
  h.dispatcher.wake();
  await eventually(async () => (held.length === 1 ? true : undefined), 'the first attempt at the receiver');

  const [delivery] = await deliveries(h, alice, id);
  const retry = await h.call(alice, { method: 'POST', url: `/webhooks/${id}/deliveries/${delivery!.id}/retry` });
  assert.equal(retry.statusCode, 202, retry.payload);
  held[0]!.writeHead(500).end('busy');

  const done = await eventually(async () => {
    const [d] = await deliveries(h, alice, id);
    return d?.status === 'delivered' ? d : undefined;
  }, 'the retried delivery delivered');
  assert.equal(done.attempts, 2, 'the attempt that failed, then the retry');
  assert.equal(requests, 2);
});

test('enable, or PATCH status active, on an active webhook keeps its failure streak (failingSince)', async (t) => {
  const h = await deliveryHarness(t, [0, 600_000]);
  const receiver = await new TestReceiver().start(t);
  receiver.answer = () => ({ status: 500 });
  const alice = await h.token('alice', SCOPES);
  const id = await addWebhook(h, alice, receiver.url);
  h.dispatcher.start();
  const created = await h.call(alice, { method: 'POST', url: '/plants', ...json(plantBody('1', 'Fern')) });
  assert.equal(created.statusCode, 200);
  h.dispatcher.wake();
  const webhook = async (): Promise<Record<string, unknown>> => {
    const res = await h.call(alice, { method: 'GET', url: '/webhooks' });
    return (JSON.parse(res.payload) as Array<Record<string, unknown>>).find((w) => w.id === id)!;
  };
  const failing = await eventually(async () => {
    const w = await webhook();
    return typeof w.failingSince === 'string' ? w : undefined;
  }, 'the webhook failing');
  assert.equal(failing.status, 'active');

  const enabled = await h.call(alice, { method: 'POST', url: `/webhooks/${id}/enable` });
  assert.equal(enabled.statusCode, 200, enabled.payload);
  assert.equal((JSON.parse(enabled.payload) as { failingSince: unknown }).failingSince, failing.failingSince);
  const patched = await h.call(alice, {
    method: 'PATCH',
    url: `/webhooks/${id}`,
    ...json(JSON.stringify({ status: 'active' })),
  });
  assert.equal(patched.statusCode, 200, patched.payload);
  assert.equal((JSON.parse(patched.payload) as { failingSince: unknown }).failingSince, failing.failingSince);
  assert.deepEqual(await webhook(), failing);
});
