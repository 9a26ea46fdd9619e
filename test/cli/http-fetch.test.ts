import { PlantStoreClient } from '@plant-store/client';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { httpFetch } from '../../src/cli/http-fetch.js';

// The plants commands send through node:http instead of the global fetch (whose
// undici cost 0.1 s of CPU a command). The client must read both the same: each case below runs
// once with the global fetch and once with httpFetch, and must end alike: the answer, the error,
// and the requests the server saw (what was retried, what was not).

type Handler = (req: IncomingMessage, res: ServerResponse, seen: number) => void;

async function outcome(
  handler: Handler,
  call: (client: PlantStoreClient) => Promise<unknown>,
  fetchImpl?: typeof fetch,
) {
  let seen = 0;
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    seen++;
    let body = '';
    req.on('data', (chunk: Buffer) => void (body += chunk.toString()));
    req.on('end', () => {
      bodies.push(`${req.method} ${req.url} ${req.headers['content-type'] ?? '-'} ${body}`);
      handler(req, res, seen);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const client = new PlantStoreClient({
    baseUrl: `http://127.0.0.1:${port}`,
    token: 'ps_test_0123456789abcdefghijklmnopqrstuv',
    timeoutMs: 500,
    retries: 2,
    baseDelayMs: 1,
    maxDelayMs: 2,
    ...(fetchImpl === undefined ? {} : { fetch: fetchImpl }),
  });
  try {
    const value = await call(client).then(
      (v) => ({ ok: JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x)) }),
      // The socket's own words may differ ("other side closed", "socket hang up"): not the rest.
      (e: Error) => ({
        error: `${e.name}: ${e.message.replace(/:\d+\//, ':PORT/').replace(/(other side closed|socket hang up)$/, 'closed')}`,
      }),
    );
    return { value, bodies };
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string | string[]> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

const names = async (c: PlantStoreClient): Promise<string[]> => {
  const seen: string[] = [];
  for await (const plant of c.list({})) seen.push(plant.name);
  return seen;
};

const cases: Array<[string, Handler, (client: PlantStoreClient) => Promise<unknown>]> = [
  ['a created plant', (_q, res) => json(res, 200, { name: 'Fern' }), (c) => c.create({ id: 5n, name: 'Fern' })],
  [
    '503 then an answer: retried',
    (_q, res, n) =>
      n === 1 ? json(res, 503, { error: 503, message: 'busy' }, { 'retry-after': '0' }) : json(res, 200, []),
    names,
  ],
  [
    'a page with a Link header',
    (req, res) =>
      req.url!.includes('cursor')
        ? json(res, 200, [{ name: 'b' }])
        : json(res, 200, [{ name: 'a' }], { link: '</plants?cursor=x>; rel="next"' }),
    names,
  ],
  [
    'a 409 refusal',
    (_q, res) => json(res, 409, { error: 409, message: 'exists' }),
    (c) => c.create({ id: 1n, name: 'x' }),
  ],
  [
    'a reset after a POST is read: not sent again',
    (req) => req.socket.destroy(),
    (c) => c.create({ id: 1n, name: 'x' }),
  ],
  ['a reset on a GET: retried, then the error', (req) => req.socket.destroy(), names],
  ['no answer within the timeout', () => undefined, names],
];

for (const [name, handler, call] of cases) {
  test(`httpFetch and fetch end alike: ${name}`, async () => {
    const viaFetch = await outcome(handler, call);
    const viaHttp = await outcome(handler, call, httpFetch);
    assert.deepEqual(viaHttp, viaFetch);
    assert.equal(
      'ok' in viaFetch.value,
      /plant|retried|page/.test(name) && !/reset/.test(name),
      JSON.stringify(viaFetch),
    );
  });
}

test('httpFetch and fetch end alike when nothing listens: retried, then the refusal', async () => {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  const run = (fetchImpl?: typeof fetch) =>
    new PlantStoreClient({
      baseUrl: `http://127.0.0.1:${port}`,
      token: 'ps_test_0123456789abcdefghijklmnopqrstuv',
      retries: 1,
      baseDelayMs: 1,
      maxDelayMs: 2,
      ...(fetchImpl === undefined ? {} : { fetch: fetchImpl }),
    })
      .create({ id: 1n, name: 'x' })
      .catch((e: Error) => `${e.name}: ${e.message}`);
  assert.equal(await run(httpFetch), await run());
});

test('httpFetch sends the headers it is given as a plain object, a Headers or a list of pairs, as fetch does', async () => {
  const seen: Array<string | undefined> = [];
  const server = createServer((req, res) => {
    seen.push(`${req.headers.authorization ?? '-'} ${String(req.headers['x-one'])}`);
    res.end('{}');
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  try {
    for (const headers of [
      { Authorization: 'Bearer a', 'X-One': '1' },
      new Headers({ Authorization: 'Bearer a', 'X-One': '1' }),
      [
        ['Authorization', 'Bearer a'],
        ['X-One', '1'],
      ] as [string, string][],
    ]) {
      await (await httpFetch(url, { headers })).text();
      await (await fetch(url, { headers })).text();
    }
  } finally {
    server.close();
  }
  assert.deepEqual(seen, Array<string>(6).fill('Bearer a 1'));
});
