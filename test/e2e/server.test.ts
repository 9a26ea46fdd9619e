import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';

// The real process, as `npm start` runs it, with tokens minted by the real CLI.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-e2e-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('the server keeps its data in data/plant-store.db by default and answers the contract over HTTP', async (t) => {
  const cwd = mkdtempSync(join(dir, 'default-'));
  const alice = await mintCliToken({}, 'alice', 'plants:read,plants:write', cwd);
  const bob = await mintCliToken({}, 'bob', 'plants:read,plants:write', cwd);
  const server = await startServer({ DATABASE_URL: undefined }, cwd);
  t.after(() => server.stop());
  assert.ok(existsSync(join(cwd, 'data', 'plant-store.db')));

  const call = (token: string, method: string, path: string, body?: string) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body,
    });

  for (const id of ['9007199254740993', '9007199254740992', '-5']) {
    const created = await call(alice, 'POST', '/plants', `{"id":${id},"name":"plant ${id}","tag":"green"}`);
    assert.equal(created.status, 200);
    assert.deepEqual(await created.json(), { name: `plant ${id}`, tag: 'green' });
  }
  const conflict = await call(bob, 'POST', '/plants', '{"id":-5,"name":"mine"}');
  assert.equal(conflict.status, 409);
  assert.equal(((await conflict.json()) as { error: number }).error, 409);

  const first = await call(alice, 'GET', '/plants?limit=2');
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('cache-control'), 'no-store');
  assert.deepEqual(await first.json(), [
    { name: 'plant -5', tag: 'green' },
    { name: 'plant 9007199254740992', tag: 'green' },
  ]);
  const next = /^<([^>]+)>; rel="next"$/.exec(first.headers.get('link') ?? '')?.[1];
  assert.ok(next, 'a Link to the next page');
  const second = await call(alice, 'GET', next);
  assert.deepEqual(await second.json(), [{ name: 'plant 9007199254740993', tag: 'green' }]);
  assert.equal(second.headers.get('link'), null);

  assert.deepEqual(await (await call(bob, 'GET', '/plants')).json(), []);
  assert.equal((await call(bob, 'DELETE', '/plants/9007199254740993')).status, 404);
  const deleted = await call(alice, 'DELETE', '/plants/9007199254740993');
  assert.equal(deleted.status, 204);
  assert.equal(await deleted.text(), '');

  const health = await fetch(`${server.url}/readyz`);
  assert.equal(health.status, 200);
  const docs = await fetch(`${server.url}/openapi.json`);
  assert.equal(((await docs.json()) as { openapi: string }).openapi, '3.1.0');

  assert.equal(await server.stop(), 0, 'SIGTERM ends the process with 0');
  const logs = server.logs();
  assert.match(logs, /"msg":"stopped cleanly"/);
  for (const token of [alice, bob]) assert.ok(!logs.includes(token), 'no token in the logs');
  assert.ok(!logs.includes(alice.slice(16, 40)), 'no part of a secret in the logs');
});

test('a token revoked through the CLI stops working on the running server within 5 seconds', async (t) => {
  const cwd = mkdtempSync(join(dir, 'revoke-'));
  const env = { DATABASE_URL: `sqlite:${join(cwd, 'store.db')}` };
  const alice = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--json'], env);
  const { id, token } = JSON.parse(alice.stdout) as { id: string; token: string };
  const server = await startServer(env, cwd);
  t.after(() => server.stop());
  const list = () => fetch(`${server.url}/plants`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal((await list()).status, 200);

  assert.equal((await runCli(['token', 'revoke', id], env)).code, 0);
  const refused = await eventually(
    async () => {
      const r = await list();
      if (r.status === 401) return r;
      await r.arrayBuffer();
      return undefined;
    },
    'refused after the revocation',
    5000,
  );
  assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="plant-store", error="invalid_token"');
  assert.equal(((await refused.json()) as { error: number }).error, 401);
});

test('serve refuses to start with a bad setting, naming it', async () => {
  const r = await runCli(['serve'], { RATE_LIMIT: 'lots' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /RATE_LIMIT/);
});
