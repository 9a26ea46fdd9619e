import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { type ServerProcess, runCli, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { redisUrl } from '../support/redis.js';

// Several `plant-store serve` processes on one PostgreSQL database behave as one service.

after(stopSharedPostgres);

interface Cluster {
  readonly env: NodeJS.ProcessEnv;
  readonly servers: ServerProcess[];
}

async function instances(
  t: { after: (fn: () => Promise<unknown>) => void },
  count: number,
  extra: NodeJS.ProcessEnv = {},
): Promise<Cluster> {
  const scratch = await scratchSchema();
  t.after(() => scratch.drop());
  const env = { DATABASE_URL: scratch.url, ...extra };
  const migrated = await runCli(['migrate'], env);
  assert.equal(migrated.code, 0, migrated.stderr);
  const servers: ServerProcess[] = [];
  for (let i = 0; i < count; i++) {
    const server = await startServer(env);
    t.after(() => server.stop());
    servers.push(server);
  }
  return { env, servers };
}

const post = (server: ServerProcess, token: string, body: string): Promise<Response> =>
  fetch(`${server.url}/plants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body,
  });

const get = (server: ServerProcess, token: string, path = '/plants'): Promise<Response> =>
  fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${token}` } });

test('concurrent creates of one id across two instances: exactly one 200, the rest 409', async (t) => {
  const { env, servers } = await instances(t, 2);
  const users = await Promise.all(['u0', 'u1', 'u2', 'u3'].map((s) => mintCliToken(env, s)));
  const attempts = Array.from({ length: 24 }, (_, i) =>
    post(servers[i % 2]!, users[i % 4]!, `{"id":9007199254740993,"name":"plant ${i}"}`),
  );
  const statuses = await Promise.all(
    attempts.map(async (pending) => {
      const r = await pending;
      await r.arrayBuffer();
      return r.status;
    }),
  );
  assert.equal(statuses.filter((s) => s === 200).length, 1);
  assert.equal(statuses.filter((s) => s === 409).length, 23);
});

test('identical concurrent creates across two instances all answer 200, and one plant exists', async (t) => {
  const { env, servers } = await instances(t, 2);
  const token = await mintCliToken(env);
  const body = '{"id":-9223372036854775808,"name":"fern","tag":"green"}';
  const responses = await Promise.all(Array.from({ length: 24 }, (_, i) => post(servers[i % 2]!, token, body)));
  for (const r of responses) {
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { name: 'fern', tag: 'green' });
  }
  for (const server of servers) {
    assert.deepEqual(await (await get(server, token)).json(), [{ name: 'fern', tag: 'green' }]);
  }
});

test('a token revoked through the CLI stops working on every instance within 5 seconds', async (t) => {
  const { env, servers } = await instances(t, 2);
  // The revoke takes the token's id: the command's JSON output has both.
  const minted = await runCli(
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write', '--json'],
    env,
  );
  assert.equal(minted.code, 0, minted.stderr);
  const { id, token } = JSON.parse(minted.stdout) as { id: string; token: string };
  for (const server of servers) assert.equal((await get(server, token)).status, 200);
  assert.equal((await runCli(['token', 'revoke', id], env)).code, 0);
  const refused = new Set<number>();
  await eventually(
    async () => {
      for (const [i, server] of servers.entries()) {
        const r = await get(server, token);
        await r.arrayBuffer();
        if (r.status === 401) refused.add(i);
      }
      return refused.size === servers.length ? true : undefined;
    },
    () => `every instance refusing the revoked token (${refused.size} of ${servers.length} do)`,
    5000,
  );
});

test('with REDIS_URL the rate limit of a token holds across instances', async (t) => {
  const redis = await redisUrl();
  const { env, servers } = await instances(t, 2, { REDIS_URL: redis, RATE_LIMIT: '6/1m' });
  const token = await mintCliToken(env);
  const seen: Array<[number, string | null]> = [];
  for (let i = 0; i < 6; i++) {
    const r = await get(servers[i % 2]!, token);
    await r.arrayBuffer();
    seen.push([r.status, r.headers.get('ratelimit-remaining')]);
  }
  assert.deepEqual(seen, [
    [200, '5'],
    [200, '4'],
    [200, '3'],
    [200, '2'],
    [200, '1'],
    [200, '0'],
  ]);
  for (const server of servers) {
    const limited = await get(server, token);
    assert.equal(limited.status, 429);
    assert.match(limited.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(((await limited.json()) as { error: number }).error, 429);
  }
});

test('without REDIS_URL each instance counts a token on its own', async (t) => {
  const { env, servers } = await instances(t, 2, { RATE_LIMIT: '3/1m' });
  const token = await mintCliToken(env);
  for (const server of servers) {
    for (let i = 0; i < 3; i++) {
      const r = await get(server, token);
      await r.arrayBuffer();
      assert.equal(r.status, 200);
    }
    const limited = await get(server, token);
    await limited.arrayBuffer();
    assert.equal(limited.status, 429);
  }
});
