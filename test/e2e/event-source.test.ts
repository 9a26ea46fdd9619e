import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openPostgres } from '../../src/store/postgres/store.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import { type ServerProcess, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort, scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { Follower } from './event-follower.js';
import { twoBehindNginx } from './nginx-front.js';

// A stream outlives a deploy (docs/api.md#the-change-feed): a standard EventSource client following
// GET /events keeps following across a SIGTERM and restart, a SIGHUP reload of `serve --workers 1`
// and a rolling restart behind deploy/nginx.conf, on both engines: every event once, in order, and
// the client still OPEN at the end. Before the fix a draining server answered the reconnect 503,
// and the client (as the specification says) gave up for good.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-eventsource-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const engines: Array<[string, () => Promise<{ url: string; drop: () => Promise<void> }>]> = [
  [
    'SQLite',
    () => Promise.resolve({ url: `sqlite:${join(mkdtempSync(join(dir, 'db-')), 'store.db')}`, drop: async () => {} }),
  ],
  ['PostgreSQL', scratchSchema],
];

/** A bound on each test, so that a client that hangs fails it rather than the run. */
const LIMIT = { timeout: 90_000 };

/**
 * Creates plants `from` … `from + count - 1`, one event each. A create that meets a server between
 * two lives (refused, cut) is sent again: an identical retry answers 200 and adds no event.
 */
async function createPlants(url: () => string, token: string, from: number, count: number): Promise<void> {
  for (let id = from; id < from + count; id++) {
    let status = 0;
    await eventually(
      async () => {
        try {
          const response = await fetch(`${url()}/plants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' },
            body: `{"id":${id},"name":"plant ${id}"}`,
          });
          status = response.status;
          await response.arrayBuffer();
        } catch {
          status = 0; // no server listening at this instant
        }
        return status === 200 ? true : undefined;
      },
      () => `plant ${id} created (last status ${status})`,
      30_000,
    );
  }
}

/** Until the server has logged `line`, checked as its output arrives; a bounded wait. */
async function logged(server: ServerProcess, line: string): Promise<void> {
  await eventually(
    async () => (server.logs().includes(line) ? true : undefined),
    () => `"${line}" logged: ${server.logs().slice(-2000)}`,
    30_000,
  );
}

/** The follower saw exactly the event log, every id once and in order, and still follows it. */
async function assertSeenOnce(follower: Follower, database: string, count: number): Promise<void> {
  const store = database.startsWith('sqlite:')
    ? openSqlite(database.slice('sqlite:'.length))
    : openPostgres(database, { poolSize: 1 });
  let log: string[];
  try {
    log = (await store.readEvents(0n, null, 1000)).map((e) => String(e.id));
  } finally {
    await store.close();
  }
  assert.equal(log.length, count, 'one event per plant created');
  const ids = follower.ids.map(BigInt);
  assert.ok(
    ids.every((id, i) => i === 0 || id > ids[i - 1]!),
    `ids strictly increasing: ${follower.ids.join(',')}`,
  );
  assert.deepEqual(follower.ids, log, 'every event of the log once, in order: no gap, no duplicate');
  assert.equal(follower.readyState, 1, `the client still follows the feed (OPEN): ${follower.errors.join('; ')}`);
}

for (const [engine, database] of engines) {
  test(
    `${engine}: an EventSource client follows GET /events across SIGTERM and a restart, every event once`,
    LIMIT,
    async (t) => {
      const db = await database();
      t.after(() => db.drop());
      const env = { DATABASE_URL: db.url, RATE_LIMIT: 'off', PORT: String(await freePort()) };
      const token = await mintCliToken(env);
      let server = await startServer(env);
      t.after(() => server.stop());
      const follower = new Follower(server.url, token);
      t.after(() => follower.close());
      await follower.opened();

      await createPlants(() => server.url, token, 1, 20);
      await follower.received(20);
      assert.equal(await server.stop(), 0, 'the old server drained and exited 0');
      assert.match(server.logs(), /"msg":"stopped cleanly"/);
      // Until the new process listens, the client's reconnects are refused: it tries again after its
      // reconnection time, as it does for any network error.
      server = await startServer(env);
      await createPlants(() => server.url, token, 21, 20);
      await follower.received(40);
      await assertSeenOnce(follower, db.url, 40);
    },
  );

  test(
    `${engine}: an EventSource client follows GET /events across a SIGHUP reload of serve --workers 1`,
    LIMIT,
    async (t) => {
      const db = await database();
      t.after(() => db.drop());
      const env = { DATABASE_URL: db.url, RATE_LIMIT: 'off' };
      const token = await mintCliToken(env);
      const server = await startServer(env, undefined, ['--workers', '1']);
      t.after(() => server.stop());
      const follower = new Follower(server.url, token);
      t.after(() => follower.close());
      await follower.opened();

      await createPlants(() => server.url, token, 1, 20);
      await follower.received(20);
      server.child.kill('SIGHUP');
      // Plants are created while the new worker takes over, and after the old one is gone.
      await createPlants(() => server.url, token, 21, 10);
      await logged(server, '"msg":"reload done"');
      await createPlants(() => server.url, token, 31, 10);
      await follower.received(40);
      await assertSeenOnce(follower, db.url, 40);
    },
  );

  test(
    `${engine}: an EventSource client follows GET /events through nginx across a rolling restart`,
    LIMIT,
    async (t) => {
      const db = await database();
      t.after(() => db.drop());
      const env = { DATABASE_URL: db.url };
      const token = await mintCliToken(env);
      const { nginx, instances, start } = await twoBehindNginx(t, dir, env);
      const follower = new Follower(nginx.url, token);
      t.after(() => follower.close());
      await follower.opened();

      await createPlants(() => nginx.url, token, 1, 10);
      await follower.received(10);
      let next = 11;
      for (const name of ['a', 'b'] as const) {
        assert.equal(await instances[name]!.stop(), 0, `instance ${name} drained and exited 0`);
        await createPlants(() => nginx.url, token, next, 5); // one instance serves meanwhile
        await start(name);
        await createPlants(() => nginx.url, token, next + 5, 10);
        next += 15;
      }
      await follower.received(40, 30_000).catch((error: Error) => assert.fail(`${error.message}\n${nginx.errors()}`));
      await assertSeenOnce(follower, db.url, 40);
    },
  );
}
