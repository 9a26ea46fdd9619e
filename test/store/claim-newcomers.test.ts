import assert from 'node:assert/strict';
import { claimSettled } from '../support/settled-claim.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openPostgres } from '../../src/store/postgres/store.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { EVENT_TYPES } from '../../src/store/event-store.js';
import { type ClaimedDelivery, type Newcomers, originOf } from '../../src/store/webhook-store.js';
import { reusableScratch, stopSharedPostgres } from '../support/postgres.js';
import { underTest } from '../support/engines.js';

// The webhooks axis of bench:scale: a claim's slow start. A webhook the dispatcher has
// no count for takes the room its receiver's origin has (`byOrigin`: a receiver seen to answer),
// or else is a newcomer: `room` deliveries (one), for at most `most` newcomers in a claim. Without
// `newcomers`, every webhook takes `perWebhook` as before. Both engines, the same answers.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-newcomers-'));
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await stopSharedPostgres();
});

const engines: ReadonlyArray<{ name: string; open(): Promise<{ store: Store; close(): Promise<void> }> }> = [
  {
    name: 'sqlite',
    async open() {
      const store = openSqlite(join(dir, `claims-${Math.random().toString(36).slice(2)}.db`));
      await store.migrate();
      return { store, close: () => store.close() };
    },
  },
  {
    name: 'postgres',
    async open() {
      const scratch = await reusableScratch();
      const store = openPostgres(scratch.url, { poolSize: 2 });
      await store.migrate();
      return {
        store,
        close: async () => {
          await store.close();
          await scratch.release();
        },
      };
    },
  },
];

/** An active webhook that sees every plant: of its own subject, at hooks.example, unless told. */
const activeWebhook = (id: string, { owner = `owner-${id}`, url = `https://hooks.example/${id}` } = {}) => ({
  id,
  owner,
  allPlants: true,
  url,
  events: EVENT_TYPES,
  status: 'active' as const,
  secret: `whsec_${id}`,
  createdAt: Date.now(),
});

/** w000 to w299: more webhooks than one window of a claim's walk. */
const IDS = Array.from({ length: 300 }, (_, i) => `w${String(i).padStart(3, '0')}`);

/** Webhooks a1, a2 at https://answers.example, h1…h4 at https://hangs.example:8443, one subject each. */
async function seed(store: Store): Promise<void> {
  const at = (id: string, url: string) => activeWebhook(id, { url });
  for (const id of ['a1', 'a2']) await store.createWebhook(at(id, `https://answers.example/hooks/${id}?x=1`), 20);
  for (const id of ['h1', 'h2', 'h3', 'h4']) await store.createWebhook(at(id, `https://hangs.example:8443/${id}`), 20);
  // Five plants: five deliveries due to each webhook (every webhook sees every plant).
  for (let i = 1n; i <= 5n; i++) await store.createPlant({ id: i, owner: 'someone', name: `plant ${i}`, tag: null });
}

/** Deliveries claimed, counted by webhook, in the webhooks' order. */
const byWebhook = (claimed: ClaimedDelivery[]): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const { webhook } of [...claimed].sort((x, y) => x.webhook.id.localeCompare(y.webhook.id)))
    counts[webhook.id] = (counts[webhook.id] ?? 0) + 1;
  return counts;
};

const claim = (store: Store, holder: string, busy: ReadonlyMap<string, number>, newcomers?: Newcomers) =>
  claimSettled(store, {
    holder,
    leaseMs: 60_000,
    limit: 100,
    perWebhook: 3,
    busy,
    subjects: {
      perSubject: 100,
      busy: new Map(),
      newcomers,
    },
  });

test('originOf reads what PostgreSQL reads: everything before the path, query or fragment', () => {
  assert.equal(originOf('https://answers.example/hooks/a1?x=1'), 'https://answers.example');
  assert.equal(originOf('https://hangs.example:8443/h1'), 'https://hangs.example:8443');
  assert.equal(originOf('http://127.0.0.1:9000'), 'http://127.0.0.1:9000');
  assert.equal(originOf('https://u:p@host.example#x'), 'https://u:p@host.example');
  assert.equal(originOf('https://[::1]:8443?q'), 'https://[::1]:8443');
});

for (const engine of underTest(engines)) {
  test(`${engine.name}: without newcomers every webhook takes perWebhook`, async (t) => {
    const opened = await engine.open();
    t.after(() => opened.close());
    const { store } = opened;
    await seed(store);
    assert.deepEqual(byWebhook(await claim(store, 'h', new Map())), { a1: 3, a2: 3, h1: 3, h2: 3, h3: 3, h4: 3 });
  });

  test(`${engine.name}: a newcomer takes one delivery, at most \`most\` of them a claim; an answering origin's webhooks their whole room; a counted webhook its own`, async (t) => {
    const opened = await engine.open();
    t.after(() => opened.close());
    const { store } = opened;
    await seed(store);
    // Nothing known: at most two newcomers, one delivery each, in the webhooks' order.
    const first = await claim(store, 'h', new Map(), { byOrigin: new Map(), room: 1, most: 2 });
    assert.deepEqual(byWebhook(first), { a1: 1, a2: 1 });
    // answers.example answered: a1 and a2 take the origin's room (2), not a newcomer's; the
    // hanging origin's webhooks are newcomers, two of them; h3 is counted (1 out), so not a newcomer.
    const busy = new Map([['h3', 1]]);
    const second = await claim(store, 'h', busy, {
      byOrigin: new Map([[originOf('https://answers.example/'), 2]]),
      room: 1,
      most: 2,
    });
    assert.deepEqual(byWebhook(second), { a1: 2, a2: 2, h1: 1, h2: 1, h3: 2 });
    // No newcomer room left: only the counted and the known origins' webhooks.
    const third = await claim(store, 'h', new Map([['h4', 3]]), {
      byOrigin: new Map([[originOf('https://answers.example/'), 2]]),
      room: 1,
      most: 0,
    });
    assert.deepEqual(byWebhook(third), { a1: 2, a2: 2 });
  });
}

for (const engine of underTest(engines)) {
  test(`${engine.name}: a claim takes the webhooks in turn from the one after \`after\`, past those with no room, wrapping round, beyond one statement's window`, async (t) => {
    const opened = await engine.open();
    t.after(() => opened.close());
    const { store } = opened;
    const ids = IDS;
    for (const id of ids) await store.createWebhook(activeWebhook(id), 20);
    await store.createPlant({ id: 1n, owner: 'someone', name: 'one', tag: null });
    // w000 to w149 have no room (their share out); the turn starts after w200.
    const full = new Map(ids.slice(0, 150).map((id) => [id, 3]));
    const claimed = await claimSettled(store, {
      holder: 'h',
      leaseMs: 60_000,
      limit: 100,
      perWebhook: 3,
      busy: full,
      subjects: {
        perSubject: 100,
        busy: new Map(),
        after: 'w200',
      },
    });
    assert.deepEqual(
      claimed.map((d) => d.webhook.id),
      [...ids.slice(201), 'w150'],
    );
    // The rest, from the start again (no `after`): w151 to w200, one each.
    const rest = await claimSettled(store, {
      holder: 'h',
      leaseMs: 60_000,
      limit: 100,
      perWebhook: 3,
      busy: full,
      subjects: {
        perSubject: 100,
        busy: new Map(),
      },
    });
    assert.deepEqual(
      rest.map((d) => d.webhook.id),
      ids.slice(151, 201),
    );
  });
}

for (const engine of underTest(engines)) {
  test(`${engine.name}: a subject's share holds across the windows of one claim`, async (t) => {
    const opened = await engine.open();
    t.after(() => opened.close());
    const { store } = opened;
    const ids = IDS;
    for (const [i, id] of ids.entries()) {
      await store.createWebhook(activeWebhook(id, { owner: i < 200 ? 'x' : 'y' }), 1000);
    }
    await store.createPlant({ id: 1n, owner: 'someone', name: 'one', tag: null });
    // 60 wanted, 10 a subject: x's first ten, then y's (after 200 of x's webhooks), and no more.
    const claimed = await claimSettled(store, {
      holder: 'h',
      leaseMs: 60_000,
      limit: 60,
      perWebhook: 3,
      busy: new Map(),
      subjects: {
        perSubject: 10,
        busy: new Map(),
      },
    });
    assert.deepEqual(
      claimed.map((d) => d.webhook.id),
      [...ids.slice(0, 10), ...ids.slice(200, 210)],
    );
  });
}

for (const engine of underTest(engines)) {
  test(`${engine.name}: a claim's turn passes over the webhooks with nothing pending and the disabled ones with deliveries pending, wrapping round`, async (t) => {
    const opened = await engine.open();
    t.after(() => opened.close());
    const { store } = opened;
    const ids = IDS;
    const create = (id: string) => store.createWebhook(activeWebhook(id), 20);
    // The even ones before the plant (a delivery each), the odd ones after it (nothing pending);
    // every third even one then disabled, its delivery still pending.
    for (const id of ids.filter((_, i) => i % 2 === 0)) await create(id);
    await store.createPlant({ id: 1n, owner: 'someone', name: 'one', tag: null });
    for (const id of ids.filter((_, i) => i % 2 === 1)) await create(id);
    for (const id of ids.filter((_, i) => i % 6 === 0)) {
      assert.equal((await store.updateWebhook(id, null, { status: 'disabled' }))?.disabled, true);
    }
    const owed = ids.filter((_, i) => i % 2 === 0 && i % 6 !== 0);
    const turn = [...owed.filter((id) => id > 'w201'), ...owed.filter((id) => id <= 'w201')];
    const claimOf = (limit: number, after: string) =>
      claimSettled(store, {
        holder: 'h',
        leaseMs: 60_000,
        limit,
        perWebhook: 1,
        busy: new Map(),
        subjects: { perSubject: 100, busy: new Map(), after },
      });
    const first = await claimOf(60, 'w201');
    assert.deepEqual(
      first.map((d) => d.webhook.id),
      turn.slice(0, 60),
    );
    const rest = await claimOf(100, first.at(-1)!.webhook.id);
    assert.deepEqual(
      rest.map((d) => d.webhook.id),
      turn.slice(60),
    );
  });
}
