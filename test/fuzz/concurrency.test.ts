import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import { stopSharedPostgres } from '../support/postgres.js';
import { type Principals, type Who, issuePrincipals } from './auth.arb.js';
import { PlantModel } from './model.js';
import { assertPlant, assertStatus, jsonBody, plantJson } from './oracle.js';
import { REPLAY, runs } from './settings.js';
import { WireClient, type WireResponse } from './wire.js';

// "Concurrent creates of one id: exactly one wins; identical retries all get 200, and one plant
// exists" (docs/api.md#create-a-plant). Batches of creates over a few ids race on separate
// connections; every answer must fit one winner per id, and the store must end up holding exactly
// the winners.

const CONNECTIONS = 6;
const model = new PlantModel();
let h: TestApp;
let principals: Principals;
let clients: WireClient[];

before(async () => {
  h = await makeApp();
  principals = await issuePrincipals(h);
  const port = await listen(h);
  clients = Array.from({ length: CONNECTIONS }, () => new WireClient(port));
});

after(async () => {
  for (const client of clients) client.close();
  await h.close();
  await stopSharedPostgres();
});

interface Create {
  readonly who: Who;
  readonly id: bigint;
  readonly name: string;
  readonly tag: string | null;
}

const createArb: fc.Arbitrary<Create> = fc.record({
  who: fc.constantFrom<Who>('alice', 'bob', 'admin'),
  id: fc.constantFrom(-1n, 0n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n),
  name: fc.constantFrom('fern', 'ivy'),
  tag: fc.constantFrom(null, 'green'),
});

function send(client: WireClient, c: Create): Promise<WireResponse> {
  const tag = c.tag === null ? '' : `,"tag":${JSON.stringify(c.tag)}`;
  return client.send({
    method: 'POST',
    target: '/plants',
    headers: [
      ['Authorization', `Bearer ${principals.who[c.who].token}`],
      ['Content-Type', 'application/json'],
    ],
    body: Buffer.from(`{"id":${c.id},"name":${JSON.stringify(c.name)}${tag}}`),
  });
}

/** Every create of one id: one holder (the plant already stored, or a winner of the batch); its twins get 200, the rest 409. */
function judge(creates: readonly Create[], responses: readonly WireResponse[]): void {
  for (const id of new Set(creates.map((c) => c.id))) {
    const mine = creates.flatMap((c, i) => (c.id === id ? [{ c, response: responses[i]! }] : []));
    const stored = model.get(id);
    const first = mine.find(({ response }) => response.status === 200)?.c;
    const holder = stored ?? (first && { owner: principals.who[first.who].subject, name: first.name, tag: first.tag });
    assert.ok(holder !== undefined, `a create of ${id} wins`);
    for (const { c, response } of mine) {
      const twin = principals.who[c.who].subject === holder.owner && c.name === holder.name && c.tag === holder.tag;
      assertStatus(response, twin ? 200 : 409);
      if (twin) assertPlant(jsonBody(response), c);
    }
    if (stored === undefined) model.create(principals.who[first!.who], id, holder.name, holder.tag);
  }
}

async function deleteAll(client: WireClient): Promise<void> {
  for (const id of model.ids()) {
    const headers: Array<[string, string]> = [['Authorization', `Bearer ${principals.who.admin.token}`]];
    assertStatus(await client.send({ method: 'DELETE', target: `/plants/${id}`, headers }), 204);
    model.delete(principals.who.admin, id);
  }
}

test(`concurrent creates of the same ids have exactly one winner each`, async (t) => {
  t.diagnostic(REPLAY);
  const arb = fc.record({ creates: fc.array(createArb, { minLength: 2, maxLength: 12 }), reset: fc.boolean() });
  const property = fc.asyncProperty(arb, async ({ creates, reset }) => {
    const responses: WireResponse[] = [];
    await Promise.all(
      clients.map(async (client, k) => {
        for (let i = k; i < creates.length; i += CONNECTIONS) responses[i] = await send(client, creates[i]!);
      }),
    );
    judge(creates, responses);
    // Half the batches start from an empty store, so that new races keep happening.
    if (reset) await deleteAll(clients[0]!);
  });
  await fc.assert(property, runs(300));
});

test('afterwards the store holds exactly the winners', async () => {
  const headers: Array<[string, string]> = [['Authorization', `Bearer ${principals.who.admin.token}`]];
  const response = await clients[0]!.send({ method: 'GET', target: '/plants?limit=1000', headers });
  assertStatus(response, 200);
  const expected = model.list(principals.who.admin, { limit: 1000 }).plants;
  assert.deepEqual(jsonBody(response), expected.map(plantJson));
});
