import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, test } from 'node:test';
import pg from 'pg';
import { mintCliToken, startServer } from '../process.js';
import { RawStream, eventually } from '../events/stream-support.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

// A GET /events still being set up when SIGTERM arrives must not hold the shutdown
// open. Before the fix it was registered after every stream had been ended, so the drain waited
// out the grace period and the process exited 1. PostgreSQL only: there the setup awaits the
// database, which a lock held by another session makes it do for as long as the test wants. On
// SQLite the setup's reads are synchronous, so no signal can arrive in its middle.

after(stopSharedPostgres);

test(
  'PostgreSQL: SIGTERM while a stream is being set up: it gets 200 with retry: and ends, and the process exits 0',
  { timeout: 120_000 },
  async (t) => {
    // Undone in this order whatever fails: the lock first, since dropping the schema waits for it.
    const cleanups: Array<() => Promise<unknown>> = [];
    t.after(async () => {
      for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    });
    const db = await scratchSchema();
    cleanups.push(() => db.drop());
    // No dispatcher (WEBHOOK_DELIVERY=off): its looks would wait on the lock too and could take every
    // pooled connection, so that the stream's setup never reached the database.
    const env = { DATABASE_URL: db.url, RATE_LIMIT: 'off', SHUTDOWN_GRACE: '8s', WEBHOOK_DELIVERY: 'off' };
    const token = await mintCliToken(env, 'alice', 'plants:read');
    // Another session holds the event log from before the server starts: the stream's setup (its
    // read of the newest event id) will wait, and so will the start-up prune, which begins after the
    // server listens. Both are seen in pg_locks (sessions waiting for this schema's event log; other
    // test files use other schemas of the same database). The statement's text cannot tell them
    // apart: a pooled connection waiting in its Parse step still shows its previous statement; so
    // the prune is awaited first, alone, and the stream's setup is the one wait more.
    const locker = new pg.Client({ connectionString: db.url });
    await locker.connect();
    cleanups.push(() => locker.end());
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE');
    const waiting = async (): Promise<number> =>
      (
        await locker.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'events'::regclass AND NOT granted`,
        )
      ).rows[0]!.n;
    const server = await startServer(env);
    cleanups.push(() => server.stop());
    await eventually('the start-up prune waits for the lock', async () => (await waiting()) === 1);
    const stream = new RawStream(Number(new URL(server.url).port), token);
    cleanups.push(async () => stream.destroy());
    await eventually('the stream’s setup waits for the lock', async () => (await waiting()) === 2);

    const exited = once(server.child, 'exit');
    server.child.kill('SIGTERM');
    await eventually('the drain has begun', () => server.logs().includes('shutting down'));
    await locker.query('ROLLBACK'); // the setup goes on, after every stream was ended
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0, server.logs().slice(-2000));
    assert.match(server.logs(), /"msg":"stopped cleanly"/);
    await eventually('the answer ends', () => stream.closed);
    assert.equal(stream.status, 200, stream.text);
    assert.equal(stream.ended, true, 'the stream ended cleanly, not cut');
    assert.match(stream.text, /^retry: [0-9]+$/m, 'the client is told when to come back');
  },
);
