import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, describe, test, type TestContext } from 'node:test';
import pg from 'pg';
import { EVENT_ORDER_LOCK } from '../../src/store/postgres/statements.js';
import { openPostgres } from '../../src/store/postgres/store.js';
import type { PlantRecord, Store } from '../../src/store/store.js';
import type { EventStore } from '../../src/store/event-store.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

// Issue 14.1: on PostgreSQL a reader that resumes after event N never misses an event committed
// later with a smaller id (CONTRACT.md, Events). A bigserial hands ids out before commit; the
// store takes them under a transaction-level advisory lock (postgres/statements.ts, withEvents).

after(stopSharedPostgres);

const plant = (id: bigint, owner: string): PlantRecord => ({ id, owner, name: `plant ${id}`, tag: null });

/** Two instances (two pools, as two servers) on one scratch schema, and plain connections to it. */
async function fleet(t: TestContext) {
  const scratch = await scratchSchema();
  const app = `event-order-${randomBytes(4).toString('hex')}`;
  const url = new URL(scratch.url);
  url.searchParams.set('application_name', app); // finds this test's connections in pg_stat_activity
  const a = openPostgres(url.toString(), { poolSize: 8 });
  const b = openPostgres(url.toString(), { poolSize: 8 });
  const clients: pg.Client[] = [];
  t.after(async () => {
    await Promise.all([a.close(), b.close(), ...clients.map((c) => c.end())]);
    await scratch.drop();
  });
  await a.migrate();
  const connect = async (): Promise<pg.Client> => {
    const client = new pg.Client({ connectionString: scratch.url });
    clients.push(client);
    await client.connect();
    return client;
  };
  const sql = await connect();
  const eventIds = async (): Promise<bigint[]> =>
    (await sql.query<{ id: string }>('SELECT id FROM events ORDER BY id')).rows.map((r) => BigInt(r.id));
  return { a, b, app, sql, connect, eventIds };
}

/** Follows the log as the change feed does: each read resumes after the last id it saw. */
class Follower {
  cursor = 0n;
  readonly seen: bigint[] = [];
  constructor(private readonly store: EventStore) {}

  async read(): Promise<number> {
    const events = await this.store.readEvents(this.cursor, null, 500);
    for (const event of events) {
      assert.ok(event.id > this.cursor, `event ${event.id} came after ${this.cursor}`);
      this.seen.push(event.id);
      this.cursor = event.id;
    }
    return events.length;
  }

  async catchUp(): Promise<void> {
    while ((await this.read()) > 0);
  }
}

const INSERT_EVENT = `INSERT INTO events (type, owner, plant_id, payload, created_at)
  VALUES ('plant.created', 'alice', 1, '{"id":1,"name":"x"}', 0) RETURNING id`;

describe('postgres: event ids commit in id order', () => {
  test('two instances writing at once: readers following the log see every event, none skipped', async (t) => {
    const { a, b, eventIds } = await fleet(t);
    const MAX_CHANGES = 3000;
    const started = Date.now();
    let tried = 0;
    let created = 0;
    let deleted = 0;
    // Half the ids beyond 2^53, few enough that creates and deletes keep meeting.
    const ids = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? BigInt(i) : 2n ** 62n + BigInt(i)));
    const pick = <T>(from: readonly T[]): T => from[Math.floor(Math.random() * from.length)]!;
    const writer = async (store: Store) => {
      while (tried < MAX_CHANGES && Date.now() - started < 2000) {
        tried++;
        const owner = pick(['alice', 'bob']);
        if (Math.random() < 0.5) {
          if ((await store.createPlant(plant(pick(ids), owner))).created) created++;
        } else if (await store.deletePlant(pick(ids), pick([owner, null]))) deleted++;
      }
    };
    let writing = true;
    const writers = Promise.all([...Array<Store>(8).fill(a), ...Array<Store>(8).fill(b)].map(writer)).finally(
      () => (writing = false),
    );
    const followers = [new Follower(a), new Follower(b)];
    let liveReads = 0;
    const follow = async (follower: Follower) => {
      while (writing) if ((await follower.read()) > 0) liveReads++;
    };
    await Promise.all([writers, ...followers.map(follow)]);
    for (const follower of followers) await follower.catchUp();

    const all = await eventIds();
    t.diagnostic(`${created} creates and ${deleted} deletes in ${tried} tries; ${liveReads} reads found events`);
    assert.ok(created + deleted >= 100, `only ${created + deleted} changes in ${tried} tries`);
    assert.ok(liveReads >= 10, `the readers read only ${liveReads} times while the writers ran`);
    assert.equal(all.length, created + deleted, 'one event per change that happened');
    for (const follower of followers) assert.deepEqual(follower.seen, all);
    const types = await a.readEvents(0n, null, 10_000);
    assert.equal(types.filter((e) => e.type === 'plant.created').length, created);
    assert.equal(types.filter((e) => e.type === 'plant.deleted').length, deleted);
  });

  test('the test can fail: ids taken without the lock commit out of order, and a reader skips one', async (t) => {
    const { a, connect, eventIds } = await fleet(t);
    const [first, second] = [await connect(), await connect()];
    const follower = new Follower(a);
    await first.query('BEGIN');
    const skipped = BigInt((await first.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    await second.query('BEGIN');
    const later = BigInt((await second.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    await second.query('COMMIT');
    assert.ok(later > skipped);
    await follower.read(); // sees the larger id, and moves past the smaller, still uncommitted one
    await first.query('COMMIT');
    await follower.catchUp();
    assert.deepEqual(await eventIds(), [skipped, later]);
    assert.deepEqual(follower.seen, [later], 'the reader never sees the event that committed late');
  });

  test('a change waits for the lock an uncommitted event holds, so no larger id commits first', async (t) => {
    const { a, b, app, sql, connect, eventIds } = await fleet(t);
    await a.createPlant(plant(2n, 'alice'));
    const follower = new Follower(a);
    await follower.catchUp();
    // An event's transaction as withEvents writes it: the lock, then the id; not yet committed.
    const open = await connect();
    await open.query('BEGIN');
    await open.query('SELECT pg_advisory_xact_lock($1)', [EVENT_ORDER_LOCK]);
    const first = BigInt((await open.query<{ id: string }>(INSERT_EVENT)).rows[0]!.id);
    const changes = Promise.all([b.createPlant(plant(1n, 'bob')), a.deletePlant(2n, null)]);
    // Both changes are waiting for the lock (awaited in pg_locks, not guessed with a timer).
    const waiting = `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity s USING (pid)
      WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objid = $1 AND s.application_name = $2`;
    await eventually(
      async () =>
        (await sql.query<{ n: number }>(waiting, [EVENT_ORDER_LOCK, app])).rows[0]!.n >= 2 ? true : undefined,
      'both changes waiting for the event-order lock',
    );
    assert.equal(await follower.read(), 0, 'nothing committed while the first event is open');
    await open.query('COMMIT');
    assert.deepEqual(await changes, [{ created: true }, true]);
    await follower.catchUp();
    const all = await eventIds();
    assert.equal(all.length, 4);
    assert.deepEqual(follower.seen, all);
    assert.equal(all[1], first, 'the changes took ids after the open one');
  });
});
