// One claim of 64 deliveries with n active webhooks: `dense`, every webhook with 2 due; `sparse`,
// 64 webhooks with 2 due and the rest with none (after the first two claims, nothing is left to
// lease: the claim then looks at every webhook and finds nothing); `backlog`, one webhook with n
// due (each of its own plant), 32 of them leased at a time. 20 claims in a row, each from
// where the last ended (as the dispatcher walks): p50, min and max. The claim at 1,000 and
// 10,000 webhooks: `node --import tsx bench/scale-claim.ts <n> [dense|sparse|backlog] [--engine sqlite|postgres]`
// (postgres unless told). With BENCH_SCALE_CHECKOUT=<dir> (a built checkout: its dist/), the 20
// claims run ROUNDS times with that checkout's store (A) and this one's (B) alternating, on one
// database, every lease released before each series.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { openPostgres as OpenPostgres } from '../src/store/postgres/store.js';
import type { openSqlite as OpenSqlite } from '../src/store/sqlite/store.js';
import type { Store } from '../src/store/store.js';
import { type Engine, createRunDb } from './kit/scale.js';
import { deliveriesHavePlant, seedDeliveries, seedEvents } from './scale-deliveries.js';

const args = process.argv.slice(2);
const engineAt = args.indexOf('--engine');
const engine: Engine = engineAt >= 0 ? (args.splice(engineAt, 2)[1] as Engine) : 'postgres';
if (engine !== 'sqlite' && engine !== 'postgres') throw new Error(`--engine sqlite|postgres, not ${String(engine)}`);
const n = Number(args[0] ?? 10000);
const sparse = args[1] === 'sparse';
const backlog = args[1] === 'backlog';
const ROUNDS = Number(process.env.BENCH_SCALE_ROUNDS ?? 3);

const db = await createRunDb(engine);
const now = Date.now();
const pg = engine === 'postgres';
await db.sql(
  `INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
   SELECT 'w' || ${pg ? 'lpad(i::text, 15, $$0$$)' : "printf('%015d', i)"}, 'subject' || (i / 20), false,
     'http://127.0.0.1:1/hook', 'plant.created plant.deleted', 'active', 'x', ${now} FROM (${db.series(backlog ? 1 : n)}) AS t`,
);
await seedEvents(db, backlog ? n : 10, `'background'`, 3_600_000, now);
const every = Math.max(1, Math.floor(n / 64));
// As the fan-out makes them: each with its event's plant, where the schema keeps it (order per plant).
const plant = (await deliveriesHavePlant(db)) ? ['plant_id, ', 'e.plant_id, '] : ['', ''];
if (backlog) await seedDeliveries(db, n, 'w000000000000001', now);
else
  await db.sql(
    `INSERT INTO deliveries (webhook_id, event_id, ${plant[0]}type, status, attempts, next_attempt_at, created_at)
   SELECT w.id, e.id, ${plant[1]}'plant.created', 'pending', 0, ${now}, ${now} FROM webhooks w, events e
   WHERE e.id <= 2 AND (${sparse ? 1 : 0} = 0 OR ${pg ? 'right(w.id, 15)::int' : 'CAST(substr(w.id, 2) AS INTEGER)'} % ${every} = 0)`,
  );
await db.sql(pg ? 'VACUUM ANALYZE' : 'ANALYZE');

/** The store of a checkout: this one's source, or another's dist/. */
async function openIn(checkout: string | undefined): Promise<Store> {
  if (engine === 'sqlite') {
    const at = checkout === undefined ? '../src/store/sqlite/store.js' : join(checkout, 'dist/store/sqlite/store.js');
    const { openSqlite } = (await import(checkout === undefined ? at : pathToFileURL(at).href)) as {
      openSqlite: typeof OpenSqlite;
    };
    return openSqlite(db.url.slice('sqlite:'.length));
  }
  const at = checkout === undefined ? '../src/store/postgres/store.js' : join(checkout, 'dist/store/postgres/store.js');
  const { openPostgres } = (await import(checkout === undefined ? at : pathToFileURL(at).href)) as {
    openPostgres: typeof OpenPostgres;
  };
  return openPostgres(db.url, { poolSize: 2 });
}

const subjects = (after?: string) => ({
  perSubject: 64,
  busy: new Map<string, number>(),
  after,
  newcomers: { byOrigin: new Map([['http://127.0.0.1:1', 32]]), room: 1, most: 64 },
});
/** 20 claims from the first webhook on: the ms of each, sorted, and the deliveries they leased. */
async function series(store: Store): Promise<{ times: number[]; leased: number }> {
  await db.sql('UPDATE deliveries SET lease_until = NULL, lease_owner = NULL');
  let after: string | undefined;
  const times: number[] = [];
  let leased = 0;
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    const claimed = await store.claimDeliveries({
      holder: `h${i}`,
      leaseMs: 60_000,
      limit: 64,
      perWebhook: 32,
      busy: new Map(),
      fanOut: 0,
      subjects: subjects(after),
    });
    times.push(performance.now() - t0);
    leased += claimed.length;
    after = claimed.at(-1)?.webhook.id ?? after;
  }
  return { times: times.sort((a, b) => a - b), leased };
}

const checkout = process.env.BENCH_SCALE_CHECKOUT;
const stores: Array<[string, Store]> =
  checkout === undefined
    ? [['', await openIn(undefined)]]
    : [
        ['A ', await openIn(checkout)],
        ['B ', await openIn(undefined)],
      ];
for (let round = 0; round < (checkout === undefined ? 1 : ROUNDS); round++) {
  for (const [label, store] of stores) {
    const { times, leased } = await series(store);
    console.log(
      `${label}${engine} n=${n}${sparse ? ' sparse' : backlog ? ' backlog' : ''} claim of 64: p50 ${times[10]!.toFixed(1)} ms, ` +
        `min ${times[0]!.toFixed(1)}, max ${times.at(-1)!.toFixed(1)} (${leased} leased in 20)`,
    );
  }
}
for (const [, store] of stores) await store.close();
await db.drop();
