// One claim of 64 deliveries on PostgreSQL, with n active webhooks: `dense`, every webhook with 2
// due; `sparse`, 64 webhooks with 2 due and the rest with none. 20 claims in a row, each from
// where the last ended (as the dispatcher walks): p50, min and max. Issue 36's A/B of the claim's
// windows: `node --import tsx bench/scale-claim.ts <n> [dense|sparse]`, in a checkout of each.
import { createRunDb } from './scale-kit.js';
import { seedEvents } from './scale-deliveries.js';
import { openPostgres } from '../src/store/postgres/store.js';

const n = Number(process.argv[2] ?? 10000);
const sparse = process.argv[3] === 'sparse';
const db = await createRunDb('postgres');
const now = Date.now();
await db.sql(
  `INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
   SELECT 'w' || lpad(i::text, 15, '0'), 'subject' || (i / 20), false, 'http://127.0.0.1:1/hook',
     'plant.created plant.deleted', 'active', 'x', ${now} FROM (${db.series(n)}) AS t`,
);
await seedEvents(db, 10, `'background'`, 3_600_000, now);
await db.sql(
  `INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
   SELECT w.id, e.id, 'plant.created', 'pending', 0, ${now}, ${now} FROM webhooks w, events e
   WHERE e.id <= 2 AND (NOT ${sparse} OR right(w.id, 15)::int % ${Math.max(1, Math.floor(n / 64))} = 0)`,
);
await db.sql('VACUUM ANALYZE');
const store = openPostgres(db.url, { poolSize: 2 });
const subjects = (after?: string) => ({
  perSubject: 64,
  busy: new Map<string, number>(),
  after,
  newcomers: { byOrigin: new Map([['http://127.0.0.1:1', 32]]), room: 1, most: 64 },
});
let after: string | undefined;
const times: number[] = [];
for (let i = 0; i < 20; i++) {
  const t0 = performance.now();
  const claimed = await store.claimDeliveries(`h${i}`, 60_000, 64, 32, new Map(), 0, subjects(after));
  times.push(performance.now() - t0);
  after = claimed.at(-1)?.webhook.id;
}
times.sort((a, b) => a - b);
console.log(
  `n=${n}${sparse ? ' sparse' : ''} claim of 64: p50 ${times[10]!.toFixed(1)} ms, min ${times[0]!.toFixed(1)}, max ${times.at(-1)!.toFixed(1)}`,
);
await store.close();
await db.drop();
