import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { mintCliToken, startServer } from '../process.js';

// Another process holding SQLite's write lock (an operator's sqlite3 session, a long
// import, another worker) must not freeze the server: other requests are served, and a write
// that cannot get the lock in time gets 503 with Retry-After, which a client retries.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-lock-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Another process that takes the write lock (BEGIN IMMEDIATE) and keeps it until its stdin closes. */
async function lockHolder(path: string) {
  const script = `
    const Database = require('better-sqlite3');
    const db = new Database(${JSON.stringify(path)});
    db.exec('BEGIN IMMEDIATE');
    process.stdout.write('locked\\n');
    process.stdin.resume();
    process.stdin.on('end', () => { db.exec('ROLLBACK'); db.close(); process.exit(0); });
  `;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  await once(child.stdout, 'data');
  return {
    release: async (): Promise<void> => {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.stdin.end();
      await exited;
    },
  };
}

test(
  'a write lock held by another process: GET and /healthz are answered, a POST gets 503 with Retry-After, and succeeds once the lock is gone',
  { timeout: 60_000 },
  async (t) => {
    const path = join(dir, 'store.db');
    const env = { DATABASE_URL: `sqlite:${path}` };
    const token = await mintCliToken(env);
    const server = await startServer(env);
    t.after(() => server.stop());
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const create = (id: number) =>
      fetch(`${server.url}/plants`, { method: 'POST', headers, body: JSON.stringify({ id, name: `fern ${id}` }) });
    assert.equal((await create(1)).status, 200);

    const lock = await lockHolder(path);
    t.after(() => lock.release());
    const posting = create(2);
    // While the POST waits for the lock, the server answers everything else.
    for (let i = 0; i < 5; i++) {
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
      const list = await fetch(`${server.url}/plants`, { headers });
      assert.equal(list.status, 200);
      assert.deepEqual(await list.json(), [{ name: 'fern 1' }]);
    }
    const refused = await posting;
    assert.equal(refused.status, 503);
    assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/);
    assert.equal(refused.headers.get('cache-control'), 'no-store');
    const body = (await refused.json()) as { error: number; message: string };
    assert.equal(body.error, 503);
    assert.ok(body.message.length > 0);
    assert.doesNotMatch(body.message, /SqliteError|SQLITE_BUSY/);

    await lock.release();
    // The client's retry of the same create succeeds, and only one plant exists.
    assert.equal((await create(2)).status, 200);
    const list = await fetch(`${server.url}/plants`, { headers });
    assert.deepEqual(await list.json(), [{ name: 'fern 1' }, { name: 'fern 2' }]);
    assert.equal(await server.stop(), 0);
  },
);
