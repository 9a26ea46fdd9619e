import assert from 'node:assert/strict';
import { claimSettled } from '../support/settled-claim.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import Database from 'better-sqlite3';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import { openPostgres } from '../../src/store/postgres/store.js';
import { EVENT_ORDER_LOCK } from '../../src/store/postgres/statements.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import { EventPruner } from '../../src/events/pruner.js';
import { type PlantRecord, type Store } from '../../src/store/store.js';
import { EVENT_TYPES, type EventRecord, PRUNE_START } from '../../src/store/event-store.js';
import {
  type AttemptOutcome,
  type ClaimedDelivery,
  type DeliveryRecord,
  type NewWebhookRecord,
  RecoverStoppedError,
  type WebhookRecord,
} from '../../src/store/webhook-store.js';
import { eventually } from '../support/eventually.js';
import { reusableScratch, stopSharedPostgres } from '../support/postgres.js';
import { underTest } from '../support/engines.js';

// The event log, webhooks and deliveries (docs/api.md#events): one suite, run unchanged on both
// engines (docs/conventions.md#tests). The ordering proof under concurrency:
// postgres-event-order.test.ts.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-events-'));
after(() => rmSync(dir, { recursive: true, force: true }));
after(stopSharedPostgres);

interface Harness {
  readonly store: Store;
  /** A second instance on the same database: another server process. */
  readonly other: Store;
  /** SQL on the database itself, for what the port cannot express (ageing rows, counting what is gone). */
  sql(text: string): Promise<Array<Record<string, unknown>>>;
  close(): Promise<void>;
}

let files = 0;
const engines: ReadonlyArray<{ readonly name: 'sqlite' | 'postgres'; open(): Promise<Harness> }> = [
  {
    name: 'sqlite',
    async open() {
      const path = join(dir, `events-${files++}.db`);
      const store = openSqlite(path);
      await store.migrate();
      const other = openSqlite(path);
      const db = new Database(path);
      return {
        store,
        other,
        sql: (text) => {
          const statement = db.prepare(text);
          if (!statement.reader) statement.run();
          return Promise.resolve(statement.reader ? (statement.all() as Array<Record<string, unknown>>) : []);
        },
        close: async () => {
          await Promise.all([store.close(), other.close()]);
          db.close();
        },
      };
    },
  },
  {
    name: 'postgres',
    async open() {
      const scratch = await reusableScratch();
      const store = openPostgres(scratch.url, { poolSize: 4 });
      await store.migrate();
      const other = openPostgres(scratch.url, { poolSize: 4 });
      const client = new pg.Client({ connectionString: scratch.url });
      await client.connect();
      return {
        store,
        other,
        sql: async (text) => (await client.query<Record<string, unknown>>(text)).rows,
        close: async () => {
          await Promise.all([store.close(), other.close(), client.end()]);
          await scratch.release();
        },
      };
    },
  },
];

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;
const DAY = 24 * 60 * 60 * 1000;

const plant = (id: bigint, owner = 'alice', name = `plant ${id}`, tag: string | null = null): PlantRecord => ({
  id,
  owner,
  name,
  tag,
});

const webhook = (id: string, owner: string, over: Partial<NewWebhookRecord> = {}): NewWebhookRecord => ({
  id,
  owner,
  allPlants: false,
  url: `https://hooks.example/${id}`,
  events: EVENT_TYPES,
  status: 'active',
  secret: `whsec_${id}`,
  createdAt: Date.now(),
  ...over,
});

const delivered: AttemptOutcome = {
  status: 'delivered',
  lastStatus: 200,
  lastError: null,
  retryInMs: null,
  healthy: true,
  disable: null,
  disableWhenFailingForMs: 5 * DAY,
  durationMs: 12,
  response: 'ok',
};
const retryIn = (retryInMs: number, disableWhenFailingForMs = 5 * DAY): AttemptOutcome => ({
  status: 'pending',
  lastStatus: 503,
  lastError: 'the receiver answered 503',
  retryInMs,
  healthy: false,
  disable: null,
  disableWhenFailingForMs,
  durationMs: 34,
  response: null,
});
const failed: AttemptOutcome = {
  ...retryIn(0),
  status: 'failed',
  lastStatus: 500,
  lastError: 'the receiver answered 500',
  retryInMs: null,
};

const claim = (store: Store, holder: string, limit = 100, perWebhook = 100, busy = new Map<string, number>()) =>
  claimSettled(store, { holder, leaseMs: 60_000, limit, perWebhook, busy });

const allEvents = (store: Store): Promise<EventRecord[]> => store.readEvents(0n, null, 10_000);
const eventSummary = (events: EventRecord[]) => events.map((e) => [e.type, e.owner, e.payload]);

async function deliveriesOf(store: Store, webhookId: string): Promise<DeliveryRecord[]> {
  return (await store.listDeliveries(webhookId, null, 1000)) ?? assert.fail(`no webhook ${webhookId}`);
}

async function statusOf(store: Store, webhookId: string): Promise<WebhookRecord['status'] | undefined> {
  return (await store.listWebhooks(null)).find((w) => w.id === webhookId)?.status;
}

const byId = (a: { id: bigint }, b: { id: bigint }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

for (const engine of underTest(engines)) {
  const withStore = (name: string, body: (h: Harness) => Promise<void>, todo?: string): void => {
    test(name, { todo }, async (t) => {
      const h = await engine.open();
      t.after(() => h.close());
      await body(h);
    });
  };

  describe(`${engine.name}: the event log`, () => {
    withStore('a new store has no events, no horizon and no last id', async ({ store }) => {
      assert.deepEqual(await allEvents(store), []);
      assert.equal(await store.lastEventId(), 0n);
      assert.equal(await store.eventHorizon(), 0n);
    });

    withStore('createPlant writes one plant.created event whose payload is the exact NewPlant', async ({ store }) => {
      await store.createPlant(plant(MAX, 'alice', 'say "hi" \\ back', 't'));
      await store.createPlant(plant(MIN, 'bob', 'naïve 日本 🌵 e\u0301'));
      await store.createPlant(plant(2n ** 53n + 1n, 'alice', 'x', '🏷️'));
      await store.createPlant(plant(2n ** 53n, 'alice', 'y'));
      const events = await allEvents(store);
      assert.deepEqual(eventSummary(events), [
        ['plant.created', 'alice', String.raw`{"id":9223372036854775807,"name":"say \"hi\" \\ back","tag":"t"}`],
        ['plant.created', 'bob', '{"id":-9223372036854775808,"name":"naïve 日本 🌵 e\u0301"}'],
        ['plant.created', 'alice', '{"id":9007199254740993,"name":"x","tag":"🏷️"}'],
        ['plant.created', 'alice', '{"id":9007199254740992,"name":"y"}'],
      ]);
      for (let i = 1; i < events.length; i++) assert.ok(events[i]!.id > events[i - 1]!.id, 'ids strictly increase');
      assert.ok(events.every((e) => e.id > 0n && typeof e.createdAt === 'number'));
      assert.equal(await store.lastEventId(), events.at(-1)!.id);
    });

    withStore(
      'readEvents and readEventRows keep an owner’s events or every one, of some types or all, in id order past 9',
      async ({ store }) => {
        for (let i = 1n; i <= 12n; i++) await store.createPlant(plant(i, i % 3n === 0n ? 'bob' : 'alice'));
        for (const id of [2n, 3n, 4n]) assert.equal(await store.deletePlant(id, null), true);
        const all = await allEvents(store);
        assert.equal(all.length, 15);
        const rowsOf = (events: EventRecord[]) => events.map((e) => [String(e.id), e.type, e.payload, e.createdAt]);
        const alices = all.filter((e) => e.owner === 'alice');
        const deleted = (events: EventRecord[]) => events.filter((e) => e.type === 'plant.deleted');
        // Ids as text must still come in numeric order: "10" after "9" (a text sort would not).
        assert.deepEqual(await store.readEventRows(0n, null, 100), rowsOf(all));
        assert.deepEqual(await store.readEventRows(all[7]!.id, null, 3), rowsOf(all.slice(8, 11)));
        assert.deepEqual(await store.readEventRows(0n, 'alice', 100), rowsOf(alices));
        for (const types of [['plant.deleted'], ['plant.created']] as const) {
          const of = (events: EventRecord[]) => events.filter((e) => e.type === types[0]);
          assert.deepEqual(await store.readEvents(0n, null, 100, types), of(all));
          assert.deepEqual(await store.readEvents(0n, 'alice', 100, types), of(alices));
          assert.deepEqual(await store.readEventRows(0n, 'alice', 100, types), rowsOf(of(alices)));
        }
        assert.deepEqual(await store.readEvents(0n, null, 100, [...EVENT_TYPES]), all);
        // The limit counts the events read, after the filters: not the rows skipped to find them.
        assert.deepEqual(
          await store.readEvents(0n, 'bob', 1, ['plant.deleted']),
          deleted(all).filter((e) => e.owner === 'bob'),
        );
      },
    );

    withStore(
      'deletePlant writes plant.deleted with the owner of the plant, an admin delete too',
      async ({ store }) => {
        await store.createPlant(plant(MIN, 'alice'));
        await store.createPlant(plant(MAX, 'bob'));
        assert.equal(await store.deletePlant(MIN, 'alice'), true);
        assert.equal(await store.deletePlant(MAX, null), true);
        assert.deepEqual(eventSummary((await allEvents(store)).slice(2)), [
          ['plant.deleted', 'alice', '{"id":-9223372036854775808}'],
          ['plant.deleted', 'bob', '{"id":9223372036854775807}'],
        ]);
      },
    );

    withStore('a change that did not happen writes no event', async ({ store }) => {
      await store.createPlant(plant(1n, 'alice', 'fern', 'green'));
      const last = await store.lastEventId();
      assert.equal((await store.createPlant(plant(1n, 'alice', 'fern', 'green'))).created, false); // a retry
      assert.equal((await store.createPlant(plant(1n, 'bob', 'rose', null))).created, false); // a conflict
      assert.equal(await store.deletePlant(2n, 'alice'), false); // missing
      assert.equal(await store.deletePlant(2n, null), false);
      assert.equal(await store.deletePlant(1n, 'bob'), false); // another owner's
      assert.deepEqual(eventSummary(await allEvents(store)), [
        ['plant.created', 'alice', '{"id":1,"name":"fern","tag":"green"}'],
      ]);
      assert.equal(await store.lastEventId(), last);
    });

    withStore('insertBatch writes one event per inserted plant, none for unchanged or conflicting ones', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'carol'), 20);
      await store.createPlant(plant(2n, 'bob', 'rose', 'red'));
      const batch = [
        plant(1n, 'alice', 'fern'),
        plant(2n, 'bob', 'rose', 'red'),
        plant(3n, 'carol', 'aloe'),
        plant(3n, 'carol', 'aloe'),
        plant(3n, 'dave', 'aloe'),
        plant(2n, 'eve', 'rose', 'red'),
      ];
      assert.equal((await store.insertBatch(batch)).inserted, 2);
      const expected = [
        ['plant.created', 'bob', '{"id":2,"name":"rose","tag":"red"}'],
        ['plant.created', 'alice', '{"id":1,"name":"fern"}'],
        ['plant.created', 'carol', '{"id":3,"name":"aloe"}'],
      ];
      assert.deepEqual(eventSummary(await allEvents(store)), expected);
      assert.equal((await store.insertBatch(batch)).inserted, 0); // an import run again
      assert.deepEqual(eventSummary(await allEvents(store)), expected);
      // The import path fans out too: carol's webhook has a delivery for carol's imported plant.
      const carols = (await allEvents(store))[2]!;
      assert.deepEqual(
        (await deliveriesOf(store, 'wh-1')).map((d) => [d.type, d.eventId]),
        [['plant.created', carols.id]],
      );
    });

    withStore('readEvents answers an owner’s events, or all, in pages after a cursor', async ({ store }) => {
      const owners = ['alice', 'bob', 'alice', 'alice', 'bob', 'carol', 'alice'];
      for (const [i, owner] of owners.entries()) await store.createPlant(plant(BigInt(i * 10 - 30), owner));
      const all = await allEvents(store);
      assert.deepEqual(
        all.map((e) => e.owner),
        owners,
      );
      const pages = async (owner: string | null, limit: number): Promise<EventRecord[][]> => {
        const seen: EventRecord[][] = [];
        for (let after = 0n; ;) {
          const page = await store.readEvents(after, owner, limit);
          seen.push(page);
          if (page.length === 0) return seen;
          after = page.at(-1)!.id;
        }
      };
      const alice = await pages('alice', 2);
      assert.deepEqual(
        alice.map((p) => p.length),
        [2, 2, 0],
      );
      assert.deepEqual(
        alice.flat(),
        all.filter((e) => e.owner === 'alice'),
      );
      const everyone = await pages(null, 3);
      assert.deepEqual(
        everyone.map((p) => p.length),
        [3, 3, 1, 0],
      );
      assert.deepEqual(everyone.flat(), all);
      assert.deepEqual(await store.readEvents(all[2]!.id, 'bob', 10), [all[4]]);
      assert.deepEqual(await store.readEvents(0n, 'dave', 10), []);
      assert.equal(await store.lastEventId(), all.at(-1)!.id);
    });
  });

  describe(`${engine.name}: fan-out to webhooks`, () => {
    withStore('a change gets a delivery for each active webhook that wants its type and may see it', async (h) => {
      const { store } = h;
      const hooks = [
        webhook('wh-a', 'alice'),
        webhook('wh-b', 'alice', { events: ['plant.created'] }),
        webhook('wh-c', 'alice', { events: ['plant.deleted'] }),
        webhook('wh-d', 'alice', { status: 'disabled' }),
        webhook('wh-e', 'bob'),
        webhook('wh-f', 'root', { allPlants: true }),
      ];
      for (const w of hooks) assert.equal(await store.createWebhook(w, 20), true);
      await store.createPlant(plant(10n, 'alice'));
      await store.deletePlant(10n, 'alice');
      await store.createPlant(plant(20n, 'bob'));
      await store.createPlant(plant(20n, 'bob')); // a retry: no event, no delivery
      const [created, deleted, bobs] = (await allEvents(store)).map((e) => e.id);
      const expected: Record<string, Array<[string, bigint | undefined]>> = {
        'wh-a': [
          ['plant.deleted', deleted],
          ['plant.created', created],
        ],
        'wh-b': [['plant.created', created]],
        'wh-c': [['plant.deleted', deleted]],
        'wh-d': [],
        'wh-e': [['plant.created', bobs]],
        'wh-f': [
          ['plant.created', bobs],
          ['plant.deleted', deleted],
          ['plant.created', created],
        ],
      };
      for (const [id, want] of Object.entries(expected)) {
        const found = await deliveriesOf(store, id);
        assert.deepEqual(
          found.map((d) => [d.type, d.eventId]),
          want,
          id,
        );
        const fields = (d: DeliveryRecord) => [d.webhookId, d.status, d.attempts, d.lastStatus, d.lastError];
        assert.deepEqual(
          found.map(fields),
          found.map(() => [id, 'pending', 0, null, null]),
        );
        assert.ok(found.every((d) => typeof d.nextAttemptAt === 'number' && typeof d.createdAt === 'number'));
      }
      // Newest first, up to the limit; another owner's webhook is not found.
      assert.deepEqual(
        (await store.listDeliveries('wh-f', 'root', 2))?.map((d) => d.eventId),
        [bobs, deleted],
      );
      assert.equal(await store.listDeliveries('wh-a', 'bob', 10), undefined);
      assert.equal(await store.listDeliveries('missing', null, 10), undefined);
    });

    // A create writes only its event; the deliveries are made behind the delivery cursor
    // (docs/events.md), with the webhooks of the event's time: these pin that equivalence.
    const cursorOf = async (h: Harness): Promise<bigint> =>
      BigInt((await h.sql('SELECT fanned_through FROM delivery_cursor'))[0]!.fanned_through as string);

    withStore('a create writes no delivery row; a look fans its event out and moves the cursor', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      const before = await cursorOf(h);
      await store.createPlant(plant(1n, 'alice'));
      await store.createPlant(plant(2n, 'alice'));
      assert.deepEqual(await h.sql('SELECT id FROM deliveries'), [], 'nothing in the create’s transaction');
      assert.equal(await cursorOf(h), before);
      // A look under pressure fans out only as many events as it asks for.
      const [first] = await claimSettled(store, {
        holder: 'h',
        leaseMs: 60_000,
        limit: 1,
        perWebhook: 10,
        busy: new Map(),
        fanOut: 1,
      });
      const events = await allEvents(store);
      assert.equal(first!.eventId, events[0]!.id);
      assert.equal(await cursorOf(h), events[0]!.id);
      assert.equal(await store.nextDueInMs(), 0, 'the second event still waits behind the cursor');
      const [second] = await claim(store, 'h');
      assert.equal(second!.eventId, events[1]!.id);
      assert.equal(await cursorOf(h), events[1]!.id);
      assert.equal(await store.nextDueInMs(), null);
    });

    withStore('a webhook created after an event is not sent it, even before that event is fanned out', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-old', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await store.createWebhook(webhook('wh-new', 'alice'), 20);
      await store.createPlant(plant(2n, 'alice'));
      const [one, two] = (await allEvents(store)).map((e) => e.id);
      assert.deepEqual(
        (await deliveriesOf(store, 'wh-old')).map((d) => d.eventId),
        [two, one],
      );
      assert.deepEqual(
        (await deliveriesOf(store, 'wh-new')).map((d) => d.eventId),
        [two],
      );
    });

    withStore(
      'a webhook disabled by a 410 keeps what was committed before; enabled, not what came while disabled',
      async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        await store.createPlant(plant(1n, 'alice'));
        const [d1] = await claim(store, 'h');
        await store.createPlant(plant(2n, 'alice')); // committed while active, not yet fanned out
        await store.recordAttempt(d1!.id, 'h', { ...failed, disable: 'gone' as const });
        assert.equal(await statusOf(store, 'wh-1'), 'disabled');
        await store.createPlant(plant(3n, 'alice')); // while disabled
        assert.deepEqual(await claim(store, 'h'), [], 'a disabled webhook’s deliveries are not claimed');
        assert.equal(await store.enableWebhook('wh-1', 'alice'), true);
        await store.createPlant(plant(4n, 'alice'));
        const [e1, e2, , e4] = (await allEvents(store)).map((e) => e.id);
        assert.deepEqual(
          (await deliveriesOf(store, 'wh-1')).map((d) => [d.eventId, d.status]),
          [
            [e4, 'pending'],
            [e2, 'pending'],
            [e1, 'failed'],
          ],
        );
      },
    );

    withStore('a webhook disabled after 5 days of failures still gets the events of its active time', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      const [d1] = await claim(store, 'h');
      await store.createPlant(plant(2n, 'alice'));
      // disableWhenFailingForMs 0: this failure completes the streak.
      await store.recordAttempt(d1!.id, 'h', retryIn(60_000, 0));
      assert.equal(await statusOf(store, 'wh-1'), 'disabled');
      await store.createPlant(plant(3n, 'alice'));
      await store.enableWebhook('wh-1', 'alice');
      const [e1, e2] = (await allEvents(store)).map((e) => e.id);
      assert.deepEqual(
        (await deliveriesOf(store, 'wh-1')).map((d) => d.eventId),
        [e2, e1],
      );
    });

    if (engine.name === 'postgres') {
      withStore('an event committing while a 410 disables its webhook is still owed to it', async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        await store.createPlant(plant(1n, 'alice'));
        const [d1] = await claim(store, 'h');
        // Another instance's create, holding the event-order lock until it commits.
        await h.sql('BEGIN');
        await h.sql(`SELECT pg_advisory_xact_lock(${EVENT_ORDER_LOCK})`);
        await h.sql(`INSERT INTO events (type, owner, plant_id, payload, created_at)
          VALUES ('plant.created', 'alice', 2, '{"id":2,"name":"plant 2"}', 0)`);
        const recorded = store.recordAttempt(d1!.id, 'h', { ...failed, disable: 'gone' as const });
        // The disable waits for the create's commit: seen in pg_locks, a session waiting for this one.
        await eventually(async () => {
          const [waiting] = await h.sql(`SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND NOT granted AND pg_backend_pid() = ANY (pg_blocking_pids(pid))`);
          return Number(waiting!.n) >= 1 ? true : undefined;
        }, 'the disable waiting for the event-order lock');
        await h.sql('COMMIT');
        assert.equal(await recorded, 'disabled');
        assert.equal(await statusOf(store, 'wh-1'), 'disabled');
        const [e1, e2] = (await allEvents(store)).map((e) => e.id);
        assert.deepEqual(
          (await deliveriesOf(store, 'wh-1')).map((d) => d.eventId),
          [e2, e1],
        );
      });
    }

    withStore('with no active webhook the cursor is not written by looks, and jumps when one is created', async (h) => {
      const { store } = h;
      await store.createPlant(plant(1n, 'alice'));
      const before = await cursorOf(h);
      assert.deepEqual(await claim(store, 'h'), []);
      assert.equal(await cursorOf(h), before, 'a look with no active webhook writes nothing');
      assert.equal(await store.nextDueInMs(), null);
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      const [e1] = (await allEvents(store)).map((e) => e.id);
      assert.equal(await cursorOf(h), e1, 'the events before it are not owed to it');
      assert.deepEqual(await deliveriesOf(store, 'wh-1'), []);
    });
  });

  describe(`${engine.name}: webhooks`, () => {
    withStore('createWebhook stops at the max per owner, also when 30 creates race with a max of 20', async (h) => {
      const { store, other } = h;
      assert.equal(await store.createWebhook(webhook('a-1', 'alice'), 2), true);
      assert.equal(await store.createWebhook(webhook('a-2', 'alice'), 2), true);
      assert.equal(await store.createWebhook(webhook('a-3', 'alice'), 2), false);
      assert.equal(await store.createWebhook(webhook('b-1', 'bob'), 2), true);
      const raced = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          (i % 2 === 0 ? store : other).createWebhook(webhook(`c-${String(i).padStart(2, '0')}`, 'carol'), 20),
        ),
      );
      assert.equal(raced.filter(Boolean).length, 20);
      assert.equal((await store.listWebhooks('carol')).length, 20);
      assert.equal((await store.listWebhooks(null)).length, 23);
    });

    withStore('listWebhooks answers the owner’s webhooks oldest first, or everyone’s', async ({ store }) => {
      const given = [
        webhook('wh-1', 'alice'),
        webhook('wh-2', 'bob', { allPlants: true, description: 'CRM sync 🌿' }),
        webhook('wh-3', 'alice'),
      ];
      for (const w of given) await store.createWebhook({ ...w, events: ['plant.deleted'] }, 20);
      // createdAt may be the store's own clock (PostgreSQL stamps it); everything else is kept.
      const shape = ({ createdAt, ...rest }: WebhookRecord) => {
        assert.equal(typeof createdAt, 'number');
        return rest;
      };
      const expected = given.map(({ createdAt: _c, ...rest }) => ({
        ...rest,
        events: ['plant.deleted'],
        description: rest.description ?? '',
        failingSince: null,
        disabledReason: null,
        previousSecret: null,
        previousSecretUntil: null,
      }));
      assert.deepEqual((await store.listWebhooks('alice')).map(shape), [expected[0], expected[2]]);
      assert.deepEqual((await store.listWebhooks(null)).map(shape), expected);
      assert.deepEqual(await store.listWebhooks('carol'), []);
    });

    withStore('deleteWebhook takes its deliveries with it; another owner’s delete answers false', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createWebhook(webhook('wh-2', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      assert.equal(await store.deleteWebhook('wh-1', 'bob'), false);
      assert.equal((await deliveriesOf(store, 'wh-1')).length, 1);
      assert.equal(await store.deleteWebhook('wh-1', 'alice'), true);
      assert.equal(await store.deleteWebhook('wh-1', 'alice'), false);
      assert.equal(await store.listDeliveries('wh-1', null, 10), undefined);
      const left = await h.sql("SELECT webhook_id FROM deliveries WHERE webhook_id = 'wh-1'");
      assert.deepEqual(left, []);
      assert.equal(await store.deleteWebhook('wh-2', null), true); // plants:admin, or an operator
      assert.deepEqual(await store.listWebhooks(null), []);
      assert.deepEqual(await h.sql('SELECT id FROM deliveries'), []);
    });

    withStore('enableWebhook makes a disabled webhook active; another owner’s answers false', async ({ store }) => {
      await store.createWebhook(webhook('wh-1', 'alice', { status: 'disabled' }), 20);
      assert.equal(await store.enableWebhook('wh-1', 'bob'), false);
      assert.equal(await statusOf(store, 'wh-1'), 'disabled');
      assert.equal(await store.enableWebhook('wh-1', 'alice'), true);
      assert.equal(await statusOf(store, 'wh-1'), 'active');
      assert.equal(await store.enableWebhook('missing', null), false);
    });
  });

  describe(`${engine.name}: claiming and recording deliveries`, () => {
    withStore('claimDeliveries leases a due delivery with what a send needs, to one holder', async (h) => {
      const { store, other } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(MAX, 'alice', 'x'));
      const [event] = await allEvents(store);
      const [delivery] = await deliveriesOf(store, 'wh-1');
      const expected: ClaimedDelivery = {
        id: delivery!.id,
        eventId: event!.id,
        type: 'plant.created',
        attempts: 0,
        scheduleFrom: 0,
        payload: '{"id":9223372036854775807,"name":"x"}',
        webhook: {
          id: 'wh-1',
          owner: 'alice',
          url: 'https://hooks.example/wh-1',
          secret: 'whsec_wh-1',
          previousSecret: null,
          previousSecretUntil: null,
        },
      };
      assert.deepEqual(await claim(store, 'h1'), [expected]);
      assert.deepEqual(await claim(other, 'h2'), []);
      assert.deepEqual(await claim(store, 'h1'), [], 'a lease is not claimed twice, even by its holder');
    });

    withStore('two holders claiming at once get disjoint deliveries, every one of them once', async (h) => {
      const { store, other } = h;
      for (const id of ['wh-1', 'wh-2', 'wh-3']) await store.createWebhook(webhook(id, 'alice'), 20);
      for (let round = 0; round < 5; round++) {
        for (let i = 0; i < 30; i++) await store.createPlant(plant(BigInt(round * 100 + i), 'alice'));
        const taken = new Map<bigint, string>();
        for (;;) {
          const [a, b] = await Promise.all([claim(store, 'h1', 7), claim(other, 'h2', 7)]);
          for (const [holder, claimed] of [['h1', a] as const, ['h2', b] as const]) {
            for (const d of claimed) {
              assert.ok(!taken.has(d.id), `delivery ${d.id} was claimed twice`);
              taken.set(d.id, holder);
            }
          }
          if (a.length === 0 && b.length === 0) break;
        }
        assert.equal(taken.size, 90);
        for (const [id, holder] of taken) assert.equal(await store.recordAttempt(id, holder, delivered), true);
      }
    });

    withStore('perWebhook and the busy counts limit how many of one webhook are claimed', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-a', 'alice'), 20);
      await store.createWebhook(webhook('wh-b', 'alice'), 20);
      for (let i = 1n; i <= 5n; i++) await store.createPlant(plant(i, 'alice'));
      const ids = (await allEvents(store)).map((e) => e.id);
      const got = async (limit: number, perWebhook: number, busy: Array<[string, number]>) => {
        const claimed = await claim(store, 'h', limit, perWebhook, new Map(busy));
        await store.releaseLeases('h');
        return claimed.map((d) => [d.webhook.id, d.eventId]).sort((x, y) => String(x).localeCompare(String(y)));
      };
      // The earliest of each webhook.
      assert.deepEqual(await got(100, 2, []), [
        ['wh-a', ids[0]],
        ['wh-a', ids[1]],
        ['wh-b', ids[0]],
        ['wh-b', ids[1]],
      ]);
      assert.deepEqual(await got(100, 2, [['wh-a', 1]]), [
        ['wh-a', ids[0]],
        ['wh-b', ids[0]],
        ['wh-b', ids[1]],
      ]);
      assert.deepEqual(
        await got(100, 2, [
          ['wh-a', 2],
          ['wh-b', 3],
        ]),
        [],
      );
      assert.equal((await got(3, 5, [])).length, 3);
    });

    withStore(
      'a webhook at its limit does not keep another webhook’s due delivery from being claimed',
      async ({ store }) => {
        await store.createWebhook(webhook('wh-a', 'alice'), 20);
        await store.createWebhook(webhook('wh-b', 'alice'), 20);
        await store.createWebhook(webhook('wh-w', 'bob'), 20);
        await store.createPlant(plant(1n, 'alice'));
        await store.createPlant(plant(2n, 'alice'));
        await store.createPlant(plant(3n, 'bob'));
        const busy = new Map([
          ['wh-a', 2],
          ['wh-b', 2],
        ]);
        const claimed = await claim(store, 'h', 1, 2, busy);
        assert.deepEqual(
          claimed.map((d) => d.webhook.id),
          ['wh-w'],
        );
      },
    );

    withStore('an expired lease goes to another holder, and the first holder’s record is refused', async (h) => {
      const { store, other } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      const [first] = await claimSettled(store, {
        holder: 'h1',
        leaseMs: 50,
        limit: 10,
        perWebhook: 10,
        busy: new Map(),
      });
      const [second] = await eventually(async () => {
        const claimed = await claim(other, 'h2');
        return claimed.length > 0 ? claimed : undefined;
      }, 'the lease of 50 ms expired and another holder claimed the delivery');
      assert.equal(second!.id, first!.id);
      assert.equal(await store.recordAttempt(first!.id, 'h1', delivered), false, 'the lease was lost');
      assert.equal(await other.recordAttempt(first!.id, 'h2', delivered), true);
      const [record] = await deliveriesOf(store, 'wh-1');
      assert.deepEqual([record!.status, record!.attempts, record!.lastStatus], ['delivered', 1, 200]);
    });

    withStore('recordAttempt records delivered, pending with a retry time, and failed', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      for (let i = 1n; i <= 3n; i++) await store.createPlant(plant(i, 'alice'));
      const [d1, d2, d3] = (await claim(store, 'h')).sort(byId);
      assert.equal(await store.recordAttempt(d1!.id, 'someone else', delivered), false);
      assert.equal(await store.recordAttempt(d1!.id, 'h', delivered), true);
      assert.equal(await store.recordAttempt(d2!.id, 'h', retryIn(60_000)), true);
      assert.equal(await store.recordAttempt(d3!.id, 'h', failed), true);
      assert.equal(await store.recordAttempt(d1!.id, 'h', failed), false, 'recorded already: no lease left');
      const [r3, r2, r1] = await deliveriesOf(store, 'wh-1');
      const shape = (d: DeliveryRecord) => [d.status, d.attempts, d.lastStatus, d.lastError, d.nextAttemptAt];
      assert.deepEqual(shape(r1!), ['delivered', 1, 200, null, null]);
      assert.deepEqual(shape(r3!), ['failed', 1, 500, 'the receiver answered 500', null]);
      assert.deepEqual(shape(r2!).slice(0, 4), ['pending', 1, 503, 'the receiver answered 503']);
      // By the store's clock: at least a minute after the delivery was created, when the attempt was recorded.
      assert.ok(r2!.nextAttemptAt! >= r2!.createdAt + 60_000 && r2!.nextAttemptAt! < r2!.createdAt + 120_000);
      assert.deepEqual(await claim(store, 'h'), [], 'a retry is not due before its time');
      const due = await store.nextDueInMs();
      assert.ok(due !== null && due > 50_000 && due <= 60_000, `next due in ${due} ms`);
    });

    withStore('records of attempts that end together are answered each on its own', async ({ store }) => {
      // On PostgreSQL, delivered attempts recorded while another record runs share one statement.
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      for (let i = 1n; i <= 12n; i++) await store.createPlant(plant(i, 'alice'));
      const claimed = (await claim(store, 'h')).sort(byId);
      assert.equal(claimed.length, 12);
      const answers = await Promise.all(
        claimed.map((d, i) =>
          i === 3
            ? store.recordAttempt(d.id, 'someone else', delivered)
            : i === 7
              ? store.recordAttempt(d.id, 'h', retryIn(60_000))
              : store.recordAttempt(d.id, 'h', delivered),
        ),
      );
      assert.deepEqual(
        answers,
        claimed.map((_, i) => i !== 3),
      );
      const records = (await deliveriesOf(store, 'wh-1')).sort(byId);
      assert.deepEqual(
        records.map((d) => [d.status, d.attempts]),
        claimed.map((_, i) => (i === 3 ? ['pending', 0] : i === 7 ? ['pending', 1] : ['delivered', 1])),
      );
    });

    withStore('a retry due now is claimed again with its attempts counted', async ({ store }) => {
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      const [d] = await claim(store, 'h');
      await store.recordAttempt(d!.id, 'h', retryIn(0));
      assert.deepEqual(
        (await claim(store, 'h2')).map((c) => [c.id, c.attempts]),
        [[d!.id, 1]],
      );
    });

    withStore('`disable` disables the webhook: its deliveries wait until enableWebhook', async ({ store }) => {
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await store.createPlant(plant(2n, 'alice'));
      const [d1] = await claim(store, 'h', 1);
      const gone = { ...failed, lastStatus: 410, disable: 'gone' as const };
      assert.equal(await store.recordAttempt(d1!.id, 'h', gone), 'disabled', 'recorded, and it disabled the webhook');
      assert.equal(await statusOf(store, 'wh-1'), 'disabled');
      assert.deepEqual(await claim(store, 'h'), []);
      assert.equal(await store.enableWebhook('wh-1', 'alice'), true);
      const [d2] = await claim(store, 'h');
      assert.ok(d2 && d2.id > d1!.id);
    });

    withStore('a webhook failing for disableWhenFailingForMs is disabled; a success ends the streak', async (h) => {
      const { store } = h;
      // One webhook per owner (named after it), its deliveries retried at once after every failure.
      const attempt = async (owner: string, outcome: AttemptOutcome) => {
        const d = (await claim(store, 'h')).find((c) => c.webhook.id === owner);
        assert.ok(d, `${owner}'s delivery is due`);
        const recorded = await store.recordAttempt(d.id, 'h', outcome);
        await store.releaseLeases('h'); // the other webhooks' deliveries
        const status = await statusOf(store, owner);
        assert.equal(recorded, status === 'disabled' ? 'disabled' : true, 'the record that disabled it says so');
        return status;
      };
      const webhookOf = async (owner: string) => {
        await store.createWebhook(webhook(owner, owner), 20);
        await store.createPlant(plant(BigInt(owner.length), owner));
      };
      await webhookOf('o');
      assert.equal(await attempt('o', retryIn(0, 0)), 'disabled', 'with 0 the first failure disables');

      // The streak's start moved back a day stands for a day of failures (the store's clock, the database's on PostgreSQL).
      const aDayAgo = (owner: string) =>
        h.sql(`UPDATE webhooks SET failing_since = failing_since - ${DAY} WHERE id = '${owner}'`);

      await webhookOf('oo');
      assert.equal(await attempt('oo', retryIn(0, DAY)), 'active');
      await aDayAgo('oo');
      assert.equal(await attempt('oo', retryIn(0, DAY)), 'disabled');
      assert.equal(await store.enableWebhook('oo', 'oo'), true); // … and forgets the streak
      assert.equal(await attempt('oo', retryIn(0, DAY)), 'active');

      await webhookOf('ooo');
      assert.equal(await attempt('ooo', retryIn(0, DAY)), 'active');
      await aDayAgo('ooo');
      await store.createPlant(plant(100n, 'ooo')); // a second delivery to succeed with
      assert.equal(await attempt('ooo', { ...delivered, disableWhenFailingForMs: DAY }), 'active');
      assert.equal(await attempt('ooo', retryIn(0, DAY)), 'active', 'the success ended the streak');
    });

    withStore('retryDelivery makes a delivered or failed delivery pending and due now', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createWebhook(webhook('wh-2', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await store.createPlant(plant(2n, 'alice'));
      const claimed = (await claim(store, 'h')).filter((d) => d.webhook.id === 'wh-1').sort(byId);
      const [d1, d2] = claimed;
      await store.recordAttempt(d1!.id, 'h', delivered);
      await store.recordAttempt(d2!.id, 'h', failed);
      await store.releaseLeases('h'); // wh-2's
      assert.equal(await store.retryDelivery('wh-2', d1!.id, 'alice'), false, 'another webhook’s delivery');
      assert.equal(await store.retryDelivery('wh-1', d1!.id, 'bob'), false, 'another owner');
      assert.equal(await store.retryDelivery('wh-1', 999_999n, 'alice'), false, 'no such delivery');
      assert.equal(await store.retryDelivery('wh-1', d1!.id, 'alice'), true);
      assert.equal(await store.retryDelivery('wh-1', d2!.id, null), true);
      const records = (await deliveriesOf(store, 'wh-1')).sort(byId);
      assert.deepEqual(
        records.map((d) => [d.status, d.attempts, typeof d.nextAttemptAt]),
        [
          ['pending', 1, 'number'],
          ['pending', 1, 'number'],
        ],
      );
      const again = (await claim(store, 'h2')).filter((d) => d.webhook.id === 'wh-1');
      assert.deepEqual(
        again.sort(byId).map((d) => [d.id, d.attempts]),
        [
          [d1!.id, 1],
          [d2!.id, 1],
        ],
      );
    });

    withStore('retryDelivery of a delivery in flight does not put it in flight twice', async ({ store, other }) => {
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      const [d] = await claim(store, 'h1');
      await store.retryDelivery('wh-1', d!.id, 'alice');
      assert.deepEqual(await claim(other, 'h2'), [], 'h1 still holds it');
    });

    withStore('releaseLeases gives a holder’s leases back at once', async ({ store, other }) => {
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await store.createPlant(plant(2n, 'alice'));
      assert.equal((await claim(store, 'h1')).length, 2);
      await other.releaseLeases('h2');
      assert.deepEqual(await claim(other, 'h2'), []);
      await store.releaseLeases('h1');
      assert.equal((await claim(other, 'h2')).length, 2);
    });

    withStore('nextDueInMs is 0 while a delivery is due, and the wait until its retry', async ({ store }) => {
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await store.eventsSettled(); // published: owed, not yet fanned out
      assert.equal(await store.nextDueInMs(), 0);
      const [d] = await claim(store, 'h');
      await store.recordAttempt(d!.id, 'h', retryIn(60_000));
      const wait = await store.nextDueInMs();
      assert.ok(wait !== null && wait > 50_000 && wait <= 60_000, `next due in ${wait} ms`);
      await store.retryDelivery('wh-1', d!.id, 'alice');
      assert.equal(await store.nextDueInMs(), 0);
    });

    withStore('nextDueInMs is null when no delivery of an active webhook is pending', async ({ store }) => {
      assert.equal(await store.nextDueInMs(), null, 'no delivery at all');
      await store.createWebhook(webhook('wh-1', 'alice', { status: 'disabled' }), 20);
      await store.createWebhook(webhook('wh-2', 'bob'), 20);
      await store.createPlant(plant(1n, 'bob'));
      const [d] = await claim(store, 'h');
      await store.recordAttempt(d!.id, 'h', delivered);
      assert.equal(await store.nextDueInMs(), null, 'only a delivered one');
      await store.enableWebhook('wh-1', 'alice');
      await store.createPlant(plant(2n, 'alice'));
      await store.recordAttempt((await claim(store, 'h'))[0]!.id, 'h', {
        ...failed,
        disable: 'gone' as const,
      });
      await store.createPlant(plant(3n, 'alice'));
      await store.eventsSettled();
      // An event published, not yet fanned out, is work due now while a webhook is active, whoever it is owed to.
      assert.equal(await store.nextDueInMs(), 0, 'an event behind the delivery cursor');
      assert.deepEqual(await claim(store, 'h'), [], 'bob’s webhook does not see alice’s plant');
      assert.equal(await store.nextDueInMs(), null, 'only pending ones of a disabled webhook');
    });

    withStore('nextDueInMs does not count a delivery another holder has leased as due now', async ({ store }) => {
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await claim(store, 'h');
      const due = await store.nextDueInMs();
      // Not due now: either nothing anyone may take (null), or later.
      assert.ok(due === null || due > 0, `next due in ${due} ms while the only delivery is leased for 60 s`);
    });
  });

  describe(`${engine.name}: retention`, () => {
    withStore('pruneEvents removes old events and finished deliveries in batches, never pending ones', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      for (let i = 1n; i <= 7n; i++) await store.createPlant(plant(i, 'alice'));
      const events = await allEvents(store);
      const [d1, d2, d3] = (await claim(store, 'h', 3, 3)).sort(byId);
      await store.recordAttempt(d1!.id, 'h', delivered);
      await store.recordAttempt(d2!.id, 'h', failed);
      await store.recordAttempt(d3!.id, 'h', retryIn(0));
      // The first five events and their deliveries are ten days old.
      const fifth = events[4]!.id;
      await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY} WHERE id <= ${fifth}`);
      await h.sql(`UPDATE deliveries SET created_at = created_at - ${10 * DAY} WHERE event_id <= ${fifth}`);
      assert.equal((await store.pruneEvents(20 * DAY, 2)).rows, 0, 'nothing is older than twenty days');

      // One run, as EventPruner makes it: each batch after the last.
      const removed: number[] = [];
      const horizons: bigint[] = [];
      for (let gone = -1, after = PRUNE_START; gone !== 0;) {
        const batch = await store.pruneEvents(7 * DAY, 2, after);
        removed.push((gone = batch.rows));
        horizons.push(await store.eventHorizon());
        after = batch.next;
      }
      // Two events and two finished deliveries, then the rest of the events, a batch at a time.
      assert.deepEqual(removed, [4, 2, 1, 0]);
      assert.deepEqual(horizons, [events[1]!.id, events[3]!.id, fifth, fifth]);
      assert.deepEqual(await allEvents(store), events.slice(5));
      assert.equal(await store.lastEventId(), events[6]!.id);
      const left = (await deliveriesOf(store, 'wh-1')).sort(byId);
      assert.deepEqual(
        left.map((d) => [d.eventId, d.status]),
        events.slice(2).map((e) => [e.id, 'pending']),
      );
      // A pending delivery whose event is gone is still claimed, with no payload to send.
      const claimed = (await claim(store, 'h')).sort(byId);
      assert.deepEqual(
        claimed.map((d) => d.payload),
        ['', '', '', '{"id":6,"name":"plant 6"}', '{"id":7,"name":"plant 7"}'],
      );
    });

    withStore('pruneEvents keeps an old event not yet fanned out while a webhook is active', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createPlant(plant(1n, 'alice'));
      await store.createPlant(plant(2n, 'bob'));
      await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY}`);
      assert.equal((await store.pruneEvents(7 * DAY, 10)).rows, 0, 'both are behind the cursor');
      const [d] = await claim(store, 'h');
      assert.equal(d!.payload, '{"id":1,"name":"plant 1"}');
      assert.equal((await store.pruneEvents(7 * DAY, 10)).rows, 2, 'fanned out, both may go');
      // With no active webhook nothing is owed, and old events go whatever the cursor.
      await store.deleteWebhook('wh-1', 'alice');
      await store.createPlant(plant(3n, 'alice'));
      await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY}`);
      assert.equal((await store.pruneEvents(7 * DAY, 10)).rows, 1);
    });

    withStore(
      'pruneEvents goes in id order and stops at the first event that is not old: no gap in the log',
      async (h) => {
        const { store } = h;
        for (let i = 1n; i <= 4n; i++) await store.createPlant(plant(i, 'alice'));
        const events = await allEvents(store);
        // A clock set back between the writes: the third event looks as old as the first.
        await h.sql(
          `UPDATE events SET created_at = created_at - ${10 * DAY} WHERE id IN (${events[0]!.id}, ${events[2]!.id})`,
        );
        assert.equal((await store.pruneEvents(7 * DAY, 10)).rows, 1);
        assert.equal(await store.eventHorizon(), events[0]!.id);
        const ids = async (): Promise<bigint[]> => (await allEvents(store)).map((e) => e.id);
        const kept = events.slice(1).map((e) => e.id);
        assert.deepEqual(await ids(), kept);
        // Nothing old at the front: nothing goes, however many events follow.
        assert.equal((await store.pruneEvents(7 * DAY, 10)).rows, 0);
        assert.deepEqual(await ids(), kept);
      },
    );

    withStore(
      'EventPruner prunes in one run every event and finished delivery past retention, batch after batch',
      async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        const plants = Array.from({ length: 2_510 }, (_, i) => plant(BigInt(i + 1), 'alice'));
        for (let i = 0; i < plants.length; i += 2000) await store.insertBatch(plants.slice(i, i + 2000));
        await claimSettled(store, {
          holder: 'h',
          leaseMs: 60_000,
          limit: 1,
          perWebhook: 1,
          busy: new Map(),
          fanOut: 50_000,
        }); // fans every event out
        await store.releaseLeases('h');
        await h.sql(`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL`);
        // 2,500 events and their 2,500 deliveries past retention, all deliveries of one time: three batches.
        const events = await allEvents(store);
        const newestOld = events[2_499]!.id;
        await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY} WHERE id <= ${newestOld}`);
        await h.sql(`UPDATE deliveries SET created_at = created_at - ${10 * DAY} WHERE event_id <= ${newestOld}`);
        const logged: unknown[] = [];
        const log = {
          info: (fields: unknown) => logged.push(fields),
          warn: (fields: unknown) => assert.fail(`the pruner warned: ${JSON.stringify(fields)}`),
        } as unknown as FastifyBaseLogger;
        await new EventPruner(store, 7 * DAY, log).pruneNow();
        assert.deepEqual(logged, [{ rows: 5_000 }]);
        assert.deepEqual(await allEvents(store), events.slice(2_500));
        assert.equal(await store.eventHorizon(), newestOld);
        assert.deepEqual(
          (await deliveriesOf(store, 'wh-1')).sort(byId).map((d) => d.eventId),
          events.slice(2_500).map((e) => e.id),
        );
      },
    );

    withStore(
      'a run’s batches start after its cursor, the next run from the oldest: an event committed behind it goes once old',
      async (h) => {
        const { store } = h;
        const ids = async (): Promise<bigint[]> => (await allEvents(store)).map((e) => e.id);
        /** One run as EventPruner makes it, in batches of two: the rows of each batch. */
        const run = async (): Promise<number[]> => {
          const rows: number[] = [];
          for (let after = PRUNE_START; ;) {
            const batch = await store.pruneEvents(7 * DAY, 2, after);
            rows.push(batch.rows);
            if (batch.rows < 2) return rows;
            after = batch.next;
          }
        };
        /** Takes an event out of the log until `commit`: a create that commits after the prune has read past it. */
        const holdBack = async (id: bigint) => {
          await h.sql(`CREATE TABLE held AS SELECT * FROM events WHERE id = ${id}`);
          await h.sql(`DELETE FROM events WHERE id = ${id}`);
          return async (createdAt: string) => {
            await h.sql(`INSERT INTO events SELECT id, type, owner, plant_id, payload, ${createdAt} FROM held`);
            await h.sql('DROP TABLE held');
          };
        };

        // Committed behind the cursor inside retention: it stays until it is old, then a run takes it.
        for (let i = 1n; i <= 6n; i++) await store.createPlant(plant(i, 'alice'));
        const e = (await allEvents(store)).map((event) => event.id);
        const commit = await holdBack(e[1]!);
        await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY}`);
        const first = await store.pruneEvents(7 * DAY, 2);
        assert.equal(first.rows, 2);
        assert.deepEqual(await ids(), [e[3], e[4], e[5]]);
        await commit('created_at');
        assert.ok(e[1]! < (await store.eventHorizon()), 'below the horizon, too');
        // The first event not old stops the walk: nothing after it goes while it is kept (no gap).
        assert.equal((await store.pruneEvents(7 * DAY, 2, first.next)).rows, 0);
        assert.deepEqual(await run(), [0], 'the next run keeps it too');
        assert.deepEqual(await ids(), [e[1], e[3], e[4], e[5]]);
        await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY} WHERE id = ${e[1]}`);
        assert.deepEqual(await run(), [2, 2, 0]);
        assert.deepEqual(await ids(), []);
        assert.equal(await store.eventHorizon(), e[5]);

        // Committed behind the cursor already old (a clock set back): the run's later batches pass it
        // on PostgreSQL (SQLite, with no dead index entries to skip, walks from the oldest); the next run takes it.
        for (let i = 7n; i <= 10n; i++) await store.createPlant(plant(i, 'alice'));
        const f = (await allEvents(store)).map((event) => event.id);
        const commitOld = await holdBack(f[1]!);
        await h.sql(`UPDATE events SET created_at = created_at - ${10 * DAY}`);
        const again = await store.pruneEvents(7 * DAY, 2);
        assert.equal(again.rows, 2);
        await commitOld(`created_at - ${10 * DAY}`);
        for (let after = again.next, rows = 2; rows === 2;) {
          const batch = await store.pruneEvents(7 * DAY, 2, after);
          ({ rows, next: after } = batch);
        }
        assert.deepEqual(await ids(), engine.name === 'postgres' ? [f[1]] : []);
        await run();
        assert.deepEqual(await ids(), []);
        assert.equal(await store.eventHorizon(), f[3]);
      },
    );
  });

  describe(`${engine.name}: webhook management (interface 1.2.0)`, () => {
    test('recoverDeliveries puts 10,000 failed deliveries back, their schedule started over', async (t) => {
      const h = await engine.open();
      t.after(() => h.close());
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createWebhook(webhook('wh-2', 'alice'), 20);
      const plants = Array.from({ length: 10_100 }, (_, i) => plant(BigInt(i + 1), 'alice'));
      for (let i = 0; i < plants.length; i += 2000) await store.insertBatch(plants.slice(i, i + 2000));
      await claimSettled(store, {
        holder: 'h',
        leaseMs: 60_000,
        limit: 1,
        perWebhook: 1,
        busy: new Map(),
        fanOut: 50_000,
      }); // fans every event out
      await store.releaseLeases('h');
      await h.sql(`UPDATE deliveries SET status = 'failed', attempts = 8, next_attempt_at = NULL, created_at = 5000`);
      await h.sql(
        `UPDATE deliveries SET created_at = 4999 WHERE event_id IN (SELECT id FROM events ORDER BY id LIMIT 100)`,
      ); // before `since`
      const started = performance.now();
      const requeued = await store.recoverDeliveries('wh-1', 'alice', 5000);
      const ms = performance.now() - started;
      t.diagnostic(`${engine.name}: recover of 10,000 failed deliveries took ${ms.toFixed(1)} ms`);
      assert.deepEqual(requeued, { requeued: 10_000, created: 0 });
      const counts = await h.sql(`SELECT webhook_id, status, schedule_from, count(*) AS n FROM deliveries
        GROUP BY webhook_id, status, schedule_from ORDER BY webhook_id, status`);
      assert.deepEqual(
        counts.map((r) => [r.webhook_id, r.status, Number(r.schedule_from), Number(r.n)]),
        [
          ['wh-1', 'failed', 0, 100],
          ['wh-1', 'pending', 8, 10_000],
          ['wh-2', 'failed', 0, 10_100],
        ],
        'only wh-1’s, only those since; attempts kept, the schedule counted from them',
      );
      const [first] = await claimSettled(store, {
        holder: 'h',
        leaseMs: 60_000,
        limit: 1,
        perWebhook: 1,
        busy: new Map(),
      });
      assert.deepEqual([first!.attempts, first!.scheduleFrom], [8, 8]);
      assert.equal(await store.recoverDeliveries('wh-1', 'bob', 0), undefined, 'another owner’s: no such webhook');
      assert.equal(await store.recoverDeliveries('wh-9', null, 0), undefined);
    });

    withStore(
      'recoverDeliveries in parts of a few rows: every part counted, only failed ones since `since`, other webhooks untouched',
      async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        await store.createWebhook(webhook('wh-2', 'alice'), 20);
        await store.insertBatch(Array.from({ length: 40 }, (_, i) => plant(BigInt(i + 1), 'alice')));
        await claimSettled(store, {
          holder: 'h',
          leaseMs: 60_000,
          limit: 1,
          perWebhook: 1,
          busy: new Map(),
          fanOut: 1000,
        }); // fans every event out
        await store.releaseLeases('h');
        await h.sql(`UPDATE deliveries SET status = 'failed', attempts = 3, next_attempt_at = NULL, created_at = 5000`);
        await h.sql(`UPDATE deliveries SET created_at = 4999 WHERE webhook_id = 'wh-1' AND event_id % 5 = 0`);
        await h.sql(`UPDATE deliveries SET status = 'delivered' WHERE webhook_id = 'wh-1' AND event_id % 7 = 0`);
        const count = async (where: string): Promise<number> =>
          Number((await h.sql(`SELECT count(*) AS n FROM deliveries WHERE ${where}`))[0]!.n);
        const due = await count(`webhook_id = 'wh-1' AND status = 'failed' AND created_at >= 5000`);
        const before = await count(`webhook_id = 'wh-1' AND status = 'failed' AND created_at < 5000`);
        const delivered = await count(`webhook_id = 'wh-1' AND status = 'delivered'`);
        assert.ok(due > 20 && before > 0 && delivered > 0, 'each kind of delivery is there');

        const told: Array<{ requeued: number; created: number }> = [];
        const recovered = await store.recoverDeliveries('wh-1', 'alice', 5000, {
          partRows: 3,
          onProgress: (done) => told.push(done),
        });
        assert.deepEqual(recovered, { requeued: due, created: 0 });
        // 40 deliveries in parts of 3, then 40 events: a report after each part, the totals rising to the answer.
        assert.ok(told.length >= 2 * Math.ceil(40 / 3), `${told.length} reports`);
        assert.ok(told.every((d, i) => i === 0 || d.requeued >= told[i - 1]!.requeued));
        assert.deepEqual(told.at(-1), recovered);
        assert.equal(await count(`webhook_id = 'wh-1' AND status = 'pending' AND schedule_from = 3`), due);
        assert.equal(await count(`webhook_id = 'wh-1' AND status = 'failed'`), before, 'those before since stay');
        assert.equal(await count(`webhook_id = 'wh-1' AND status = 'delivered'`), delivered);
        assert.equal(await count(`webhook_id = 'wh-2' AND status = 'failed'`), 40, 'another webhook’s stay');
        // Idempotent: nothing is left to do, whatever the size of the parts.
        assert.deepEqual(await store.recoverDeliveries('wh-1', 'alice', 5000, { partRows: 1 }), {
          requeued: 0,
          created: 0,
        });
      },
    );

    withStore(
      'recoverDeliveries makes what a pause missed across parts, in event order, once; an all-plants webhook sees every subject',
      async (h) => {
        const { store } = h;
        const created = ['plant.created'] as const;
        await store.createWebhook(webhook('wh-1', 'alice', { events: [...created] }), 20);
        await store.createWebhook(webhook('wh-all', 'admin', { events: [...created], allPlants: true }), 20);
        const createFor = async (from: number, to: number, owner: string): Promise<void> => {
          for (let i = from; i <= to; i++) await store.createPlant(plant(BigInt(i), owner));
        };
        const fanOut = async (): Promise<void> => {
          await claimSettled(store, {
            holder: 'h',
            leaseMs: 60_000,
            limit: 1,
            perWebhook: 1,
            busy: new Map(),
            fanOut: 1000,
          });
          await store.releaseLeases('h');
        };
        const pause = (id: string, owner: string) => store.updateWebhook(id, owner, { status: 'disabled' });
        await createFor(1, 4, 'alice'); // sent: fanned out while active
        await fanOut();
        await pause('wh-1', 'alice');
        await pause('wh-all', 'admin');
        await createFor(5, 8, 'alice'); // missed
        await createFor(9, 11, 'bob'); // another subject's: missed by the all-plants webhook only
        assert.equal(await store.deletePlant(2n, 'alice'), true); // a type neither takes
        await store.enableWebhook('wh-1', 'alice');
        await createFor(12, 15, 'alice'); // sent again
        await fanOut();

        const events = await allEvents(store);
        const idOf = (plantId: bigint): bigint =>
          events.find((e) => e.type === 'plant.created' && new RegExp(`"id":${plantId}[,}]`).test(e.payload))!.id;
        const eventIdsOf = async (id: string): Promise<bigint[]> =>
          (await deliveriesOf(store, id)).reverse().map((d) => d.eventId!);
        assert.deepEqual(await store.recoverDeliveries('wh-1', 'alice', 0, { partRows: 2 }), {
          requeued: 0,
          created: 4,
        });
        assert.deepEqual(
          await eventIdsOf('wh-1'),
          [1n, 2n, 3n, 4n, 12n, 13n, 14n, 15n, 5n, 6n, 7n, 8n].map(idOf),
          'made after the others, in event order (and no delivery of plant 2’s deletion: not its type)',
        );
        // Still paused: the events after wh-1's enable too.
        assert.deepEqual(await store.recoverDeliveries('wh-all', 'admin', 0, { partRows: 3 }), {
          requeued: 0,
          created: 11,
        });
        assert.deepEqual(
          await eventIdsOf('wh-all'),
          [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n, 11n, 12n, 13n, 14n, 15n].map(idOf),
          'every subject’s, in event order',
        );
        // Each event once: its deliveries are found by the next recover (those of the first one
        // among deliveries of later events), whatever the parts.
        for (const rows of [1, 2, 5, 100]) {
          assert.deepEqual(await store.recoverDeliveries('wh-1', 'alice', 0, { partRows: rows }), {
            requeued: 0,
            created: 0,
          });
          assert.deepEqual(await store.recoverDeliveries('wh-all', 'admin', 0, { partRows: rows }), {
            requeued: 0,
            created: 0,
          });
        }
      },
    );

    withStore('two recovers of one webhook at once, by two instances, make each missed delivery once', async (h) => {
      const { store, other } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.updateWebhook('wh-1', 'alice', { status: 'disabled' });
      await store.insertBatch(Array.from({ length: 60 }, (_, i) => plant(BigInt(i + 1), 'alice')));
      // The second starts once the first has made deliveries, and both go on making them in parts.
      let second: Promise<unknown> | undefined;
      const first = await store.recoverDeliveries('wh-1', 'alice', 0, {
        partRows: 4,
        onProgress: (done) => {
          if (done.created > 0) second ??= other.recoverDeliveries('wh-1', 'alice', 0, { partRows: 3 });
        },
      });
      const then = (await second) as { requeued: number; created: number };
      assert.equal(first!.created + then.created, 60, `${first!.created} and ${then.created}`);
      const twice = await h.sql(`SELECT event_id FROM deliveries WHERE webhook_id = 'wh-1'
        GROUP BY event_id HAVING count(*) > 1`);
      assert.deepEqual(twice, [], 'no event has two deliveries');
      assert.equal((await deliveriesOf(store, 'wh-1')).length, 60);
    });

    withStore(
      'a recover that fails after parts committed says what they did; called again it finishes the rest',
      async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        await store.insertBatch(Array.from({ length: 20 }, (_, i) => plant(BigInt(i + 1), 'alice')));
        await claimSettled(store, {
          holder: 'h',
          leaseMs: 60_000,
          limit: 1,
          perWebhook: 1,
          busy: new Map(),
          fanOut: 1000,
        });
        await store.releaseLeases('h');
        await h.sql(`UPDATE deliveries SET status = 'failed', attempts = 8, next_attempt_at = NULL, created_at = 5000`);
        const ids = (await deliveriesOf(store, 'wh-1')).map((d) => d.id).reverse();
        // A statement that fails on one row: the update of the 11th delivery (the third part of 4).
        const fail = async (when: string, on: 'UPDATE' | 'INSERT'): Promise<() => Promise<unknown>> => {
          if (engine.name === 'sqlite') {
            await h.sql(`CREATE TRIGGER boom BEFORE ${on} ON deliveries WHEN ${when}
              BEGIN SELECT RAISE(ABORT, 'injected failure'); END`);
            return () => h.sql('DROP TRIGGER boom');
          }
          await h.sql(`CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS
            $$BEGIN RAISE EXCEPTION 'injected failure'; END$$`);
          await h.sql(
            `CREATE TRIGGER boom BEFORE ${on} ON deliveries FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION boom()`,
          );
          return () => h.sql('DROP TRIGGER boom ON deliveries; DROP FUNCTION boom()');
        };
        const stopped = async (run: Promise<unknown>): Promise<RecoverStoppedError> => {
          const error = await run.then(
            () => assert.fail('the recover did not stop'),
            (e: unknown) => e,
          );
          assert.ok(error instanceof RecoverStoppedError, String(error));
          assert.match(String((error.cause as Error).message), /injected failure/);
          return error;
        };
        let undo = await fail(`OLD.id = ${ids[10]}`, 'UPDATE');
        try {
          const error = await stopped(store.recoverDeliveries('wh-1', 'alice', 5000, { partRows: 4 }));
          assert.deepEqual(error.done, { requeued: 8, created: 0 }, 'two parts of 4 committed');
          assert.equal(error.message, 'recover stopped after requeuing 8 and creating 0 deliveries');
        } finally {
          await undo();
        }
        assert.deepEqual(await store.recoverDeliveries('wh-1', 'alice', 5000, { partRows: 4 }), {
          requeued: 12,
          created: 0,
        });

        // The same in the missed events: the 7th of a paused webhook's, in parts of 3.
        await store.createWebhook(webhook('wh-2', 'carol'), 20);
        await store.updateWebhook('wh-2', 'carol', { status: 'disabled' });
        await store.insertBatch(Array.from({ length: 10 }, (_, i) => plant(BigInt(i + 101), 'carol')));
        const carols = (await allEvents(store)).filter((e) => e.owner === 'carol').map((e) => e.id);
        undo = await fail(`NEW.webhook_id = 'wh-2' AND NEW.event_id = ${carols[6]}`, 'INSERT');
        try {
          const error = await stopped(store.recoverDeliveries('wh-2', 'carol', 0, { partRows: 3 }));
          assert.deepEqual(error.done, { requeued: 0, created: 6 });
        } finally {
          await undo();
        }
        assert.deepEqual(await store.recoverDeliveries('wh-2', 'carol', 0, { partRows: 3 }), {
          requeued: 0,
          created: 4,
        });
        assert.deepEqual(
          (await deliveriesOf(store, 'wh-2')).map((d) => d.eventId).reverse(),
          carols,
          'each event once, in event order',
        );
      },
    );

    withStore('a recover whose webhook is deleted between its parts answers as for no webhook', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.updateWebhook('wh-1', 'alice', { status: 'disabled' });
      await store.insertBatch(Array.from({ length: 12 }, (_, i) => plant(BigInt(i + 1), 'alice')));
      let deleting: Promise<boolean> | undefined;
      const recovered = await store.recoverDeliveries('wh-1', 'alice', 0, {
        partRows: 2,
        onProgress: (done) => {
          if (done.created > 0) deleting ??= store.deleteWebhook('wh-1', 'alice');
        },
      });
      assert.equal(await deleting, true);
      assert.equal(recovered, undefined);
      assert.deepEqual(await h.sql(`SELECT id FROM deliveries WHERE webhook_id = 'wh-1'`), [], 'nothing left of it');
    });

    withStore(
      'each attempt is logged with its record, newest first; pruned with its delivery, deleted with its webhook',
      async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        for (let i = 1n; i <= 12n; i++) await store.createPlant(plant(i, 'alice'));
        const first = await claim(store, 'h');
        assert.equal(first.length, 12);
        // Twelve at once: on PostgreSQL, delivered records go in batches, their log lines with them.
        const [one, ...rest] = first;
        assert.equal(await store.recordAttempt(one!.id, 'h', retryIn(0)), true);
        await Promise.all(rest.map((d) => store.recordAttempt(d.id, 'h', delivered)));
        const [again] = await claim(store, 'h');
        assert.equal(again!.id, one!.id);
        assert.equal(await store.recordAttempt(one!.id, 'h', delivered), true);
        assert.deepEqual(await store.listAttempts('wh-1', one!.id, 'alice'), [
          {
            attempt: 2,
            at: (await store.listAttempts('wh-1', one!.id, null))![0]!.at,
            status: 200,
            durationMs: 12,
            error: null,
            response: 'ok',
          },
          {
            attempt: 1,
            at: (await store.listAttempts('wh-1', one!.id, null))![1]!.at,
            status: 503,
            durationMs: 34,
            error: 'the receiver answered 503',
            response: null,
          },
        ]);
        for (const d of rest) assert.equal((await store.listAttempts('wh-1', d.id, null))!.length, 1);
        assert.equal(await store.listAttempts('wh-1', one!.id, 'bob'), undefined);
        assert.equal(await store.listAttempts('wh-2', one!.id, null), undefined);
        const count = async () => Number((await h.sql('SELECT count(*) AS n FROM delivery_attempts'))[0]!.n);
        assert.equal(await count(), 13);
        await h.sql(`UPDATE deliveries SET created_at = created_at - ${10 * DAY} WHERE id = ${one!.id}`);
        await store.pruneEvents(7 * DAY, 100);
        assert.equal(await count(), 11, 'the pruned delivery’s two attempts went with it');
        assert.equal(await store.deleteWebhook('wh-1', 'alice'), true);
        assert.equal(await count(), 0);
      },
    );

    withStore(
      'updateWebhook, rotateSecret and pingWebhook answer undefined for another owner’s webhook',
      async ({ store }) => {
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        assert.equal(await store.updateWebhook('wh-1', 'bob', { description: 'x' }), undefined);
        assert.equal(await store.rotateSecret('wh-1', 'bob', 'plain:x', null), undefined);
        assert.equal(await store.pingWebhook('wh-1', 'bob'), undefined);
        const [w] = await store.listWebhooks(null);
        assert.deepEqual([w!.description, w!.secret, w!.previousSecret], ['', 'whsec_wh-1', null]);
        assert.deepEqual(await store.listDeliveries('wh-1', null, 10), []);
        const rotated = await store.rotateSecret('wh-1', 'alice', 'plain:new', 1234);
        assert.deepEqual(
          [rotated!.secret, rotated!.previousSecret, rotated!.previousSecretUntil],
          ['plain:new', 'whsec_wh-1', 1234],
        );
        const updated = await store.updateWebhook('wh-1', null, { status: 'disabled' });
        assert.deepEqual([updated!.disabled, updated!.webhook.disabledReason], [true, 'manual']);
        const twice = await store.updateWebhook('wh-1', null, { status: 'disabled' });
        assert.equal(twice!.disabled, false, 'already disabled: not disabled again');
      },
    );
  });

  describe(`${engine.name}: a webhook's history`, () => {
    withStore('listDeliveries below an id: newest first, at most limit; undefined for another owner', async (h) => {
      const { store } = h;
      await store.createWebhook(webhook('wh-1', 'alice'), 20);
      await store.createWebhook(webhook('wh-2', 'alice'), 20);
      for (let i = 1n; i <= 5n; i++) await store.createPlant(plant(i, 'alice'));
      const all = (await deliveriesOf(store, 'wh-1')).map((d) => d.id);
      assert.equal(all.length, 5);
      const below = async (before: bigint, limit = 2, owner: string | null = 'alice') =>
        (await store.listDeliveries('wh-1', owner, limit, before))?.map((d) => d.id);
      assert.deepEqual(await below(all[1]!), all.slice(2, 4), "wh-1's only, below the id, newest first");
      assert.deepEqual(await below(all[4]!), []);
      assert.deepEqual(await below(MAX, 10, null), all);
      assert.equal(await below(MAX, 10, 'bob'), undefined);
      assert.equal(await store.listDeliveries('wh-9', null, 10, MAX), undefined);
    });

    withStore(
      'countAttempts: every recorded attempt counts for its webhook, in its bucket of [from, from + buckets × bucketMs)',
      async (h) => {
        const { store } = h;
        await store.createWebhook(webhook('wh-1', 'alice'), 20);
        await store.createWebhook(webhook('wh-2', 'bob'), 20);
        for (let i = 1n; i <= 4n; i++) await store.createPlant(plant(i, 'alice'));
        await store.createPlant(plant(5n, 'bob'));
        const claimed = await claim(store, 'h');
        const [d1, ...others] = claimed.filter((d) => d.webhook.id === 'wh-1').sort(byId);
        const bobs = claimed.find((d) => d.webhook.id === 'wh-2')!;
        assert.equal(others.length, 3);
        // A 503 then a 200 for d1; the others delivered together (on PostgreSQL, one batched statement).
        assert.equal(await store.recordAttempt(d1!.id, 'h', retryIn(0)), true);
        await Promise.all([...others, bobs].map((d) => store.recordAttempt(d.id, 'h', delivered)));
        const [again] = await claim(store, 'h');
        assert.equal(await store.recordAttempt(again!.id, 'h', delivered), true);

        const everything = { from: 0, bucketMs: 4 * Date.now(), buckets: 1 };
        assert.deepEqual(await store.countAttempts('wh-1', 'alice', everything), [
          { bucket: 0, delivered: 4, failed: 1 },
        ]);
        assert.deepEqual(await store.countAttempts('wh-2', null, everything), [{ bucket: 0, delivered: 1, failed: 0 }]);

        // The attempts put at known times: from 1000, two buckets of 1000 ms.
        const at = async (d: ClaimedDelivery, attempt: number, ms: number) =>
          h.sql(`UPDATE delivery_attempts SET at = ${ms} WHERE delivery_id = ${d.id} AND attempt = ${attempt}`);
        await at(d1!, 1, 1000); // the 503, at the very start: bucket 0
        await at(d1!, 2, 999); // before the span
        await at(others[0]!, 1, 1999); // bucket 0
        await at(others[1]!, 1, 2000); // bucket 1
        await at(others[2]!, 1, 3000); // the end is not in the span
        const span = { from: 1000, bucketMs: 1000, buckets: 2 };
        assert.deepEqual(
          (await store.countAttempts('wh-1', 'alice', span))?.sort((a, b) => a.bucket - b.bucket),
          [
            { bucket: 0, delivered: 1, failed: 1 },
            { bucket: 1, delivered: 1, failed: 0 },
          ],
        );
        assert.deepEqual(await store.countAttempts('wh-2', 'bob', span), [], 'found, and nothing in the span');
        assert.equal(await store.countAttempts('wh-1', 'bob', span), undefined, "another owner's: no such webhook");
        assert.equal(await store.countAttempts('wh-9', null, span), undefined);
      },
    );
  });
}
