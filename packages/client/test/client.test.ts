import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { runCli } from '../../../test/process.js';
import { PlantStoreClient, PlantStoreError, type Plant } from '../src/index.js';
import { type TestServer, recordingFetch, startTestServer } from './support.js';

let server: TestServer;
let token: string;
before(async () => {
  server = await startTestServer();
  token = await server.token();
});
after(() => server.stop());

const client = (options: Partial<ConstructorParameters<typeof PlantStoreClient>[0]> = {}): PlantStoreClient =>
  new PlantStoreClient({ baseUrl: server.url, token, ...options });

async function all(plants: AsyncIterable<Plant>): Promise<Plant[]> {
  const out: Plant[] = [];
  for await (const plant of plants) out.push(plant);
  return out;
}

/** What the store holds, ids exact, as `plant-store export` writes it. */
async function exported(): Promise<string> {
  const r = await runCli(['export'], server.env);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

test('create and delete keep ids beyond 2^53 exact: 9007199254740992 and 9007199254740993 are two plants', async () => {
  const c = client({ token: await server.token(['plants:read', 'plants:write'], 'exact') });
  assert.deepEqual(await c.create({ id: 9007199254740993n, name: 'Monstera', tag: 'tropical' }), {
    name: 'Monstera',
    tag: 'tropical',
  });
  assert.deepEqual(await c.create({ id: '9007199254740992', name: 'Fern' }), { name: 'Fern' });
  assert.deepEqual(await c.create({ id: '-9223372036854775808', name: 'Lowest', tag: null }), { name: 'Lowest' });
  assert.deepEqual(await all(c.list()), [{ name: 'Lowest' }, { name: 'Fern' }, { name: 'Monstera', tag: 'tropical' }]);
  const stored = await exported();
  assert.match(stored, /"id":9007199254740993,"owner":"exact","name":"Monstera"/);
  assert.match(stored, /"id":9007199254740992,"owner":"exact","name":"Fern"/);

  await c.delete(9007199254740993n);
  await c.delete('-9223372036854775808');
  assert.deepEqual(await all(c.list()), [{ name: 'Fern' }]);
  assert.doesNotMatch(await exported(), /9007199254740993/);
});

test('create of the same plant again answers 200 with the same plant (the contract makes it a safe retry)', async () => {
  const c = client();
  const first = await c.create({ id: 77n, name: 'Aloe', tag: 'succulent' });
  assert.deepEqual(await c.create({ id: '77', name: 'Aloe', tag: 'succulent' }), first);
});

test('list follows Link rel="next" page by page: 250 plants at limit 100 in 3 requests, each once, in id order', async () => {
  const recorded = recordingFetch();
  const c = client({ token: await server.token(['plants:read', 'plants:write'], 'pager'), fetch: recorded.fetch });
  const ids = Array.from({ length: 250 }, (_, i) => 9007199254740000n + BigInt(i * 7) - 1000n * BigInt(i % 3));
  for (let i = 0; i < ids.length; i += 25) {
    await Promise.all(ids.slice(i, i + 25).map((id) => c.create({ id, name: `plant ${id}` })));
  }
  recorded.sent.length = 0;
  const listed = await all(c.list({ limit: 100 }));
  const expected = [...ids].sort((a, b) => (a < b ? -1 : 1)).map((id) => ({ name: `plant ${id}` }));
  assert.deepEqual(listed, expected);
  assert.equal(recorded.sent.length, 3);
  assert.deepEqual(
    recorded.sent.map((s) => [s.url.searchParams.get('limit'), s.url.searchParams.has('cursor')]),
    [
      ['100', false],
      ['100', true],
      ['100', true],
    ],
  );

  const first = await c.listPage({ limit: 100 });
  assert.equal(first.plants.length, 100);
  assert.equal(typeof first.next, 'string');
  const rest = await all(c.list({ limit: 100, cursor: first.next }));
  assert.deepEqual([...first.plants, ...rest], expected);
  const last = await c.listPage({ limit: 1000 });
  assert.equal(last.plants.length, 250);
  assert.equal(last.next, undefined);
});

test('list with a tag lists exactly the plants with that tag, across pages', async () => {
  const c = client({ token: await server.token(['plants:read', 'plants:write'], 'tagger') });
  for (let i = 1; i <= 7; i++) {
    await c.create({ id: BigInt(i), name: `p${i}`, ...(i % 2 === 1 ? { tag: 'odd & "quoted"' } : { tag: 'even' }) });
  }
  await c.create({ id: 8n, name: 'untagged' });
  const odd = await all(c.list({ tag: 'odd & "quoted"', limit: 2 }));
  assert.deepEqual(
    odd.map((p) => p.name),
    ['p1', 'p3', 'p5', 'p7'],
  );
  assert.deepEqual(await all(c.list({ tag: 'none of them' })), []);
});

async function refusal(call: Promise<unknown>, status: number, message: RegExp): Promise<PlantStoreError> {
  const error = await call.then(
    () => assert.fail(`expected a ${status}`),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PlantStoreError, `a PlantStoreError, not ${String(error)}`);
  assert.equal(error.status, status);
  assert.match(error.message, message);
  assert.match(error.requestId ?? '', /^[0-9a-f-]{36}$/);
  return error;
}

test('failures are PlantStoreErrors with the status and the Error body message: 401, 403, 404, 409, 400', async () => {
  const recorded = recordingFetch();
  const c = client({ fetch: recorded.fetch });
  const unknown = client({ token: 'pst_000000000000000000000000000000000000000000000000000', fetch: recorded.fetch });
  await refusal(unknown.listPage(), 401, /token/i);
  const reader = client({ token: await server.token(['plants:read']), fetch: recorded.fetch });
  await refusal(reader.create({ id: 1000n, name: 'nope' }), 403, /plants:write/);
  await refusal(c.delete(123456789n), 404, /123456789/);
  await c.create({ id: 4242n, name: 'Cactus' });
  await refusal(c.create({ id: 4242n, name: 'Not a cactus' }), 409, /already exists/);
  await refusal(c.create({ id: 1001n, name: '' }), 400, /name/);
  await refusal(c.create({ id: 1002n, name: 'bad\u0007bell' }), 400, /name/);
  await refusal(c.listPage({ tag: '' }), 400, /tag/);
  // None of them is retried: each was sent once.
  assert.equal(recorded.sent.length, 8);
});

test('ids, limits and tokens that cannot be right are refused before anything is sent', async () => {
  const recorded = recordingFetch();
  const c = client({ fetch: recorded.fetch });
  const bad: unknown[] = [5, Number.MAX_SAFE_INTEGER + 2, '1.5', '1e3', ' 7', '+7', '007', '', '9223372036854775808'];
  for (const id of bad) {
    await assert.rejects(c.create({ id: id as bigint, name: 'x' }), typeof id === 'number' ? TypeError : RangeError);
    await assert.rejects(c.delete(id as bigint), typeof id === 'number' ? TypeError : RangeError);
  }
  await assert.rejects(c.create({ id: -(2n ** 63n) - 1n, name: 'x' }), RangeError);
  for (const limit of [0, 1001, 1.5, Number.NaN]) await assert.rejects(c.listPage({ limit }), RangeError);
  assert.equal(recorded.sent.length, 0);
  assert.throws(() => client({ token: 'has space' }), TypeError);
  assert.throws(
    () => client({ token: 'line\nbreak' }),
    (e: Error) => e instanceof TypeError && !e.message.includes('line'),
  );
  assert.throws(() => client({ baseUrl: 'ftp://example.com' }), TypeError);
  assert.throws(() => client({ baseUrl: 'http://user:secret@example.com' }), TypeError);
});

test('a base URL with a path prefix is kept when the next page is fetched', async () => {
  await client().create({ id: 5001n, name: 'one' });
  await client().create({ id: 5002n, name: 'two' });
  const recorded = recordingFetch();
  const c = new PlantStoreClient({
    baseUrl: `${server.url}/prefix`,
    token,
    fetch: (input, init) => {
      const url = new URL(input instanceof Request ? input.url : input);
      assert.ok(url.pathname.startsWith('/prefix/'), url.pathname);
      url.pathname = url.pathname.slice('/prefix'.length);
      return recorded.fetch(url, init);
    },
  });
  const page = await c.listPage({ limit: 1 });
  assert.equal(page.plants.length, 1);
  assert.ok(page.next);
  await c.listPage({ limit: 1, cursor: page.next });
  assert.equal(recorded.sent.length, 2);
});
