import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ServerProcess, runCli, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/postgres.js';
import { createListLoad, storedIds } from './create-list-load.js';
import { folderContents, ready, startNginx } from './nginx-front.js';

// Issue 16, point 2: the repository's own nginx configuration (deploy/nginx.conf) in front of two
// instances on one database; the instances are restarted one by one under create/list load through
// nginx, and no request fails and no acknowledged write is lost. Debian's nginx-light; .ci/run
// installs it when missing. Everything listens on 127.0.0.1. nginx is started and stopped with the
// commands the configuration's header prints, in a folder that does not exist before (issue
// "every printed step works", 2: it needed logs/ and tmp/ made first, which the header did not say).

const dir = mkdtempSync(join(tmpdir(), 'plant-store-nginx-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a rolling restart of two instances behind deploy/nginx.conf: 0 failed requests, 0 lost writes', async (t) => {
  const [front, portA, portB] = [await freePort(), await freePort(), await freePort()];
  const nginx = await startNginx(dir, front, portA, portB);
  t.after(() => nginx.stop());
  // What the header says nginx keeps in its folder, and nothing else.
  assert.deepEqual(folderContents(nginx), [
    'client_body_temp',
    'error.log',
    'fastcgi_temp',
    'nginx.pid',
    'proxy_temp',
    'scgi_temp',
    'uwsgi_temp',
  ]);

  // The shipped SHUTDOWN_GRACE: nginx's upstream keepalive_timeout (2 s) is below the instances' Keep-Alive timeout (5 s).
  const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}`, RATE_LIMIT: 'off', SHUTDOWN_GRACE: '10s' };
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
  /** Until each instance, as it runs now, has answered `creates` creates through nginx, and the load has had them acknowledged. */
  const served = (creates: number, why: string): Promise<true> =>
    eventually(
      async () =>
        Object.values(instances).every((s) => createsAnswered(s) >= creates) && load.acknowledged.size >= 2 * creates
          ? true
          : undefined,
      () =>
        `${why}: ${creates} creates answered by each instance (${Object.entries(instances)
          .map(([name, s]) => `${name}: ${createsAnswered(s)}`)
          .join(', ')}; ${load.acknowledged.size} acknowledged; failures: ${load.failures.slice(0, 3).join('; ')})`,
      30_000,
    );

  for (const [name, port] of [
    ['a', portA],
    ['b', portB],
  ] as const) {
    await served(25, `before ${name} restarts`); // the load reaches both
    assert.equal(await instances[name]!.stop(), 0, `instance ${name} drained and exited 0`);
    await start(name, port);
    await ready(`http://127.0.0.1:${port}`);
  }
  await served(25, 'after the restarts'); // the restarted ones serve too
  await load.stop();

  assert.deepEqual(
    load.failures,
    [],
    `failed requests: ${load.failures.slice(0, 5).join('; ')}\nnginx: ${nginx.errors()}`,
  );
  const stored = await storedIds(url, token, 'lb');
  assert.deepEqual(
    [...load.acknowledged].filter((id) => !stored.has(id)),
    [],
  );
});

/** The creates an instance has answered 200, by its request log. */
function createsAnswered(server: ServerProcess): number {
  return server.logs().match(/"method":"POST","url":"\/plants","status":200,/g)?.length ?? 0;
}
