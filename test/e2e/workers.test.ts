import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

// `serve --workers N`: N processes behind one port, on either engine, stopped together.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-workers-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const engines: Array<[string, () => Promise<{ url: string; drop: () => Promise<void> }>]> = [
  [
    'SQLite',
    () => Promise.resolve({ url: `sqlite:${join(mkdtempSync(join(dir, 'db-')), 'store.db')}`, drop: async () => {} }),
  ],
  ['PostgreSQL', scratchSchema],
];

for (const [engine, database] of engines) {
  test(`serve --workers 2 on ${engine}: two processes answer on one port and stop together with exit 0`, async (t) => {
    const db = await database();
    t.after(() => db.drop());
    const env = { DATABASE_URL: db.url };
    const token = await mintCliToken(env);
    const server = await startServer(env, undefined, ['--workers', '2']);
    t.after(() => server.stop());

    // Each request on a new connection; the primary spreads connections over the workers.
    const responses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        fetch(`${server.url}/plants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' },
          body: `{"id":${i},"name":"plant ${i}"}`,
        }),
      ),
    );
    for (const r of responses) assert.equal(r.status, 200, await r.text());
    const listed = (await (
      await fetch(`${server.url}/plants?limit=1000`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as unknown[];
    assert.equal(listed.length, 40);

    const served = new Set(
      server
        .logs()
        .split('\n')
        .filter((line) => line.includes('"msg":"request completed"'))
        .map((line) => (JSON.parse(line) as { pid: number }).pid),
    );
    assert.equal(served.size, 2, 'both workers served requests');

    const exited = once(server.child, 'exit');
    server.child.kill('SIGTERM');
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0);
    assert.match(server.logs(), /"msg":"all workers stopped"/);
    assert.equal(server.logs().match(/"msg":"stopped cleanly"/g)?.length, 2);
  });
}

test('serve refuses several workers on an in-memory database', async () => {
  const r = await runCli(['serve', '--workers', '2'], { DATABASE_URL: 'sqlite::memory:' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /sqlite::memory: cannot be shared by several workers/);
});

test('serve refuses a worker count outside 1 to 64', async () => {
  for (const workers of ['0', '65', 'two']) {
    const r = await runCli(['serve', '--workers', workers], { DATABASE_URL: 'sqlite::memory:' });
    assert.equal(r.code, 2, workers);
    assert.match(r.stderr, /WORKERS \(or --workers\) must be a number from 1 to 64/);
  }
});

test('a SIGTERM to the whole process group still stops every worker cleanly, with exit 0', async (t) => {
  const env = { DATABASE_URL: `sqlite:${join(mkdtempSync(join(dir, 'group-')), 'store.db')}` };
  const server = await startServer(env, undefined, ['--workers', '3'], { detached: true });
  t.after(() => server.stop());
  const exited = once(server.child, 'exit');
  process.kill(-server.child.pid!, 'SIGTERM'); // the primary and its workers get it at once
  const [code] = (await exited) as [number | null];
  assert.equal(code, 0, server.logs());
  assert.equal(server.logs().match(/"msg":"stopped cleanly"/g)?.length, 3);
  assert.match(server.logs(), /"msg":"all workers stopped"/);
});

test(
  'serve exits 1 when it cannot listen, alone or with workers, instead of hanging',
  { timeout: 60_000 },
  async (t) => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    t.after(() => blocker.close());
    const port = String((blocker.address() as { port: number }).port);
    const env = { DATABASE_URL: `sqlite:${join(mkdtempSync(join(dir, 'busy-')), 'store.db')}`, PORT: port };
    const alone = await runCli(['serve'], env);
    assert.equal(alone.code, 1);
    assert.match(alone.stderr, /EADDRINUSE/);
    // Workers that cannot start are replaced up to 10 times a minute; then the primary gives up.
    const workers = await runCli(['serve', '--workers', '2'], env);
    assert.equal(workers.code, 1);
    assert.match(workers.stdout, /workers keep dying; giving up/);
  },
);

test('serve stops cleanly with REDIS_URL set while Redis is unreachable, and says so in its log', async (t) => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as { port: number }).port;
  await new Promise((resolve) => closed.close(resolve)); // a port where nothing listens
  const env = {
    DATABASE_URL: `sqlite:${join(mkdtempSync(join(dir, 'redis-')), 'store.db')}`,
    REDIS_URL: `redis://127.0.0.1:${port}`,
  };
  const server = await startServer(env);
  t.after(() => server.stop());
  const health = await fetch(`${server.url}/healthz`);
  assert.equal(health.status, 200);
  await eventually(
    async () => (server.logs().includes('Redis is unreachable') ? true : undefined),
    () => `the line saying Redis is unreachable: ${server.logs().slice(-2000)}`,
  );
  assert.match(server.logs(), /Redis is unreachable: rate limits are not enforced until it returns/);
  assert.equal(await server.stop(), 0);
  assert.match(server.logs(), /"msg":"stopped cleanly"/);
});
