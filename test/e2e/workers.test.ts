import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli, startServer } from '../process.js';
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
    const { token } = JSON.parse(
      (await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write', '--json'], env))
        .stdout,
    ) as { token: string };
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
