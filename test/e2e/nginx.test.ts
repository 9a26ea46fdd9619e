import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ServerProcess, runCli, startServer } from '../process.js';
import { freePort } from '../support/postgres.js';
import { createListLoad, storedIds } from './create-list-load.js';
import { ready, startNginx } from './nginx-front.js';

// Issue 16, point 2: the repository's own nginx configuration (deploy/nginx.conf) in front of two
// instances on one database; the instances are restarted one by one under create/list load through
// nginx, and no request fails and no acknowledged write is lost. Debian's nginx-light; .ci/run
// installs it when missing. Everything listens on 127.0.0.1.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-nginx-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a rolling restart of two instances behind deploy/nginx.conf: 0 failed requests, 0 lost writes', async (t) => {
  const [front, portA, portB] = [await freePort(), await freePort(), await freePort()];
  const nginx = startNginx(dir, front, portA, portB);
  t.after(() => nginx.stop());

  const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}`, RATE_LIMIT: 'off' };
  const instances: Record<string, ServerProcess> = {};
  const start = async (name: string, port: number): Promise<void> => {
    instances[name] = await startServer({ ...env, PORT: String(port) });
  };
  await start('a', portA);
  await start('b', portB);
  t.after(() => Promise.all(Object.values(instances).map((s) => s.stop())));
  const url = nginx.url;
  await ready(url);

  const { stdout } = await runCli(
    ['token', 'create', '--subject', 'lb', '--scopes', 'plants:read,plants:write', '--json'],
    { ...process.env, ...env },
  );
  const token = (JSON.parse(stdout) as { token: string }).token;
  const load = createListLoad(url, token, 'lb');

  for (const [name, port] of [
    ['a', portA],
    ['b', portB],
  ] as const) {
    await new Promise((resolve) => setTimeout(resolve, 300)); // let load reach both
    assert.equal(await instances[name]!.stop(), 0, `instance ${name} drained and exited 0`);
    await start(name, port);
    await ready(`http://127.0.0.1:${port}`);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  await load.stop();

  assert.deepEqual(load.failures, [], nginx.errors());
  assert.ok(load.acknowledged.size > 50, `${load.acknowledged.size} creates acknowledged`);
  const stored = await storedIds(url, token, 'lb');
  assert.deepEqual(
    [...load.acknowledged].filter((id) => !stored.has(id)),
    [],
  );
});
