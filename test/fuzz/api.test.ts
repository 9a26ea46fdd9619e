import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { testConfig } from '../../src/config.js';
import { type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import { stopSharedPostgres } from '../support/postgres.js';
import { type Principals, authArb, authHeaders, issuePrincipals } from './auth.arb.js';
import { draftArb, renderBody } from './body.arb.js';
import { mutationArb } from './mutation.arb.js';
import { type Fuzz, expectCreate, expectDelete, expectList } from './expect.js';
import { type Header, contentEncodingArb, contentTypeArb, otherHeadersArb, requestIdArb } from './headers.arb.js';
import { expectMatrix, matrixArb, targetArb } from './matrix.js';
import { PlantModel } from './model.js';
import { assertRequestId, assertWellFormed, plantJson } from './oracle.js';
import { pathIdArb } from './path.arb.js';
import { queryArb } from './query.arb.js';
import { REPLAY, TOTAL_RUNS, runs } from './settings.js';
import { WireClient, counter, tally } from './wire.js';

// Property-based fuzzing of the running service over real sockets: every generated request gets
// exactly the answer the contract and the model predict, never a 5xx, and every error is the
// Error body. The store is shared by all properties, so the model carries over from one to the next.

const bodyLimit = testConfig().bodyLimit;
const model = new PlantModel();
const prototypeKeys = Object.getOwnPropertyNames(Object.prototype).sort();
let h: TestApp;
let client: WireClient;
let principals: Principals;
let fuzz: Fuzz;

before(async () => {
  h = await makeApp();
  principals = await issuePrincipals(h);
  client = new WireClient(await listen(h));
  fuzz = { model, principals, bodyLimit };
});

after(async () => {
  client.close();
  await h.close();
  await stopSharedPostgres(); // TEST_ENGINE=postgres without TEST_DATABASE_URL starts a throwaway server
});

const lines = (headers: readonly Header[]): Array<[string, string]> => headers.map((x) => [x.name, x.value]);
const idLines = (ids: readonly string[]): Array<[string, string]> => ids.map((id) => ['X-Request-Id', id]);

test(`POST /plants answers every generated body as the contract says`, async (t) => {
  t.diagnostic(REPLAY);
  const arb = fc.record({
    draft: draftArb,
    mutation: mutationArb(bodyLimit),
    type: contentTypeArb,
    encoding: contentEncodingArb,
    auth: authArb(principals),
    requestId: requestIdArb,
  });
  const property = fc.asyncProperty(arb, async ({ draft, mutation, type, encoding, auth, requestId }) => {
    const body = renderBody(draft, mutation);
    const headers: Array<[string, string]> = [...authHeaders(auth), ...idLines(requestId)];
    if (type.value !== undefined) headers.push(['Content-Type', type.value]);
    if (encoding.value !== undefined) headers.push(['Content-Encoding', encoding.value]);
    const response = await client.send({ method: 'POST', target: '/plants', headers, body: body.bytes });
    expectCreate(fuzz, response, { auth, body, json: type.json, identity: encoding.identity });
    assertRequestId(response, requestId);
  });
  await fc.assert(property, runs(4600));
  t.diagnostic(tally());
});

test(`GET /plants answers every generated query as the contract says`, async (t) => {
  t.diagnostic(REPLAY);
  const arb = fc.record({ auth: authArb(principals), query: queryArb, head: fc.boolean(), requestId: requestIdArb });
  const property = fc.asyncProperty(arb, async ({ auth, query, head, requestId }) => {
    const method = head ? 'HEAD' : 'GET';
    const target = query.query === '' ? '/plants' : `/plants?${query.query}`;
    const response = await client.send({ method, target, headers: [...authHeaders(auth), ...idLines(requestId)] });
    expectList(fuzz, response, auth, query, head);
    assertRequestId(response, requestId);
  });
  await fc.assert(property, runs(2200));
  t.diagnostic(tally());
});

test(`DELETE /plants/{id} answers every generated id as the contract says`, async (t) => {
  t.diagnostic(REPLAY);
  const arb = fc.record({
    auth: authArb(principals),
    path: pathIdArb,
    query: fc.constantFrom('', '', '?', '?x=1'),
    existing: fc.option(fc.nat(), { freq: 2 }), // half the time, the id of a stored plant
  });
  const property = fc.asyncProperty(arb, async ({ auth, path: generated, query, existing }) => {
    const ids = model.ids();
    const id = existing === null || ids.length === 0 ? undefined : ids[existing % ids.length]!;
    const path = id === undefined ? generated : { segment: `${id}`, id, malformed: false };
    const target = `/plants/${path.segment}${query}`;
    const response = await client.send({ method: 'DELETE', target, headers: authHeaders(auth) });
    expectDelete(fuzz, response, auth, path);
  });
  await fc.assert(property, runs(2000));
  t.diagnostic(tally());
});

test(`every method on every path, with any headers, gets its answer`, async (t) => {
  t.diagnostic(REPLAY);
  const arb = fc.record({ matrix: matrixArb(principals), other: otherHeadersArb, requestId: requestIdArb });
  const property = fc.asyncProperty(arb, async ({ matrix, other, requestId }) => {
    const headers = [...authHeaders(matrix.auth), ...lines(other), ...idLines(requestId)];
    if (matrix.body) headers.push(['Content-Type', 'application/json']);
    const response = await client.send({
      method: matrix.method,
      target: matrix.target,
      headers,
      body: matrix.body?.bytes,
    });
    expectMatrix(fuzz, response, matrix, other);
    assertRequestId(response, requestId);
  });
  await fc.assert(property, runs(1300));
  t.diagnostic(tally());
});

test(`garbage request targets never get a 5xx or a malformed answer`, async (t) => {
  t.diagnostic(REPLAY);
  const arb = fc.record({
    method: fc.constantFrom('GET', 'HEAD', 'OPTIONS', 'PUT', 'PATCH', 'TRACE'),
    target: targetArb,
    auth: authArb(principals),
  });
  const property = fc.asyncProperty(arb, async ({ method, target, auth }) => {
    const response = await client.send({ method, target, headers: authHeaders(auth) });
    assertWellFormed(response, method === 'HEAD');
  });
  await fc.assert(property, runs(900));
  t.diagnostic(tally());
});

test('afterwards the store holds exactly the plants the model predicts', async () => {
  const { admin } = principals.who;
  let target: string | undefined = '/plants?limit=1000';
  const listed: unknown[] = [];
  while (target !== undefined) {
    const response = await client.send({
      method: 'GET',
      target,
      headers: [['Authorization', `Bearer ${admin.token}`]],
    });
    assertWellFormed(response);
    assert.equal(response.status, 200);
    listed.push(...(JSON.parse(response.body.toString()) as unknown[]));
    target = /^<([^>]+)>; rel="next"$/.exec(response.headers.get('link')?.[0] ?? '')?.[1];
  }
  const all = model.list(admin, { limit: Number.MAX_SAFE_INTEGER }).plants;
  assert.deepEqual(listed, all.map(plantJson));
});

test('afterwards the service answers a new client correctly, and no prototype was polluted', async () => {
  const token = await h.token('fuzz-afterwards', ['plants:read', 'plants:write']);
  let id = 2n ** 53n + 1n; // above 2^53, and free
  while (model.ids().includes(id)) id += 2n;
  const fresh = new WireClient((h.app.server.address() as { port: number }).port);
  try {
    const auth: Array<[string, string]> = [['Authorization', `Bearer ${token}`]];
    const json: Array<[string, string]> = [...auth, ['Content-Type', 'application/json']];
    const body = Buffer.from(`{"id":${id},"name":"after the storm","tag":"🌱"}`);
    const created = await fresh.send({ method: 'POST', target: '/plants', headers: json, body });
    assert.equal(created.status, 200, created.body.toString());
    assert.deepEqual(JSON.parse(created.body.toString()), { name: 'after the storm', tag: '🌱' });
    const listed = await fresh.send({ method: 'GET', target: '/plants', headers: auth });
    assert.equal(listed.status, 200);
    assert.deepEqual(JSON.parse(listed.body.toString()), [{ name: 'after the storm', tag: '🌱' }]);
    const deleted = await fresh.send({ method: 'DELETE', target: `/plants/${id}`, headers: auth });
    assert.equal(deleted.status, 204);
    for (const path of ['/healthz', '/readyz'])
      assert.equal((await fresh.send({ method: 'GET', target: path, headers: [] })).status, 200);
  } finally {
    fresh.close();
  }
  assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), prototypeKeys);
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});

test(`the fuzzer sent at least ${TOTAL_RUNS} requests`, () => {
  assert.ok(counter.requests >= TOTAL_RUNS, `${counter.requests} requests`);
});
