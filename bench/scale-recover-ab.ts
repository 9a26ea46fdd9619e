// A/B of the PostgreSQL recover statement's "events with no delivery to this webhook" (issue 36):
// A is `e.id NOT IN (SELECT event_id FROM deliveries WHERE webhook_id = $1)`, B the same as
// `NOT EXISTS`. NOT IN is a hashed subplan only while the webhook's event ids fit in work_mem; past
// that it is a plain subplan, the list scanned again for every event: quadratic.
//
//   node --import tsx bench/scale-recover-ab.ts [deliveries…]     (default 10000 100000)
//
// Per size: a database of its own (plant_store_scale), one webhook with that many failed
// deliveries, one per event; then A and B alternate, 2 rounds each, each in a transaction rolled
// back, with a statement_timeout of 60 s (a timeout prints as such).
import { percentile } from './harness.js';
import { seedDeliveries, seedEvents } from './scale-deliveries.js';
import { createRunDb, storedSecret } from './scale-kit.js';

const WEBHOOK = 'scaleaway0000000';
const statement = (absent: (list: string) => string): string => `WITH w AS (SELECT * FROM webhooks WHERE id = $1),
    r AS (UPDATE deliveries SET status = 'pending', schedule_from = attempts, next_attempt_at = 0
      WHERE webhook_id IN (SELECT id FROM w) AND status = 'failed' AND created_at >= $2 RETURNING 1),
    ev AS (SELECT e.id, e.type, e.owner, e.created_at FROM w JOIN events e
        ON (w.owner = e.owner OR w.all_plants) AND position(' ' || e.type || ' ' IN ' ' || w.events || ' ') > 0
      WHERE e.created_at >= greatest($2, w.created_at)
        AND e.id <= (SELECT fanned_through FROM delivery_cursor)
        AND ${absent('(SELECT event_id FROM deliveries WHERE webhook_id = $1)')}
      ORDER BY e.id),
    c AS (INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
      SELECT $1, ev.id, ev.type, 'pending', 0, ev.created_at, ev.created_at FROM ev ORDER BY ev.id RETURNING 1)
    SELECT (SELECT count(*) FROM r) AS n, (SELECT count(*) FROM c) AS created`;
const VARIANTS = {
  'A NOT IN': statement((list) => `e.id NOT IN ${list}`),
  'B NOT EXISTS': statement(
    () => 'NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.webhook_id = $1 AND d.event_id = e.id)',
  ),
};

const sizes = process.argv.slice(2).map(Number);
for (const n of sizes.length > 0 ? sizes : [10_000, 100_000]) {
  const db = await createRunDb('postgres');
  try {
    const now = Date.now();
    await db.sql(
      `INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
       VALUES ('${WEBHOOK}', 'away', false, 'http://127.0.0.1:9/hook', 'plant.created', 'active', '${storedSecret(WEBHOOK)}', ${now - 2 * 86_400_000})`,
    );
    await seedEvents(db, n, `'away'`, 86_400_000, now);
    await seedDeliveries(db, n, WEBHOOK, now);
    await db.sql(`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL`);
    await db.sql('VACUUM ANALYZE');
    const ms: Record<string, number[]> = {};
    for (let round = 0; round < 2; round++)
      for (const [name, sql] of Object.entries(VARIANTS)) {
        await db.sql("BEGIN; SET LOCAL statement_timeout = '60s'");
        const started = performance.now();
        try {
          const [row] = await db.sql(sql, [WEBHOOK, 0]);
          if (Number(row!.n) !== n || Number(row!.created) !== 0) throw new Error(`${name}: ${JSON.stringify(row)}`);
          (ms[name] ??= []).push(performance.now() - started);
        } catch (error) {
          if (!/statement timeout/.test(String(error))) throw error;
          (ms[name] ??= []).push(Infinity);
        } finally {
          await db.sql('ROLLBACK');
        }
      }
    const plan = await db.sql(`EXPLAIN ${VARIANTS['A NOT IN']}`, [WEBHOOK, 0]);
    const hashed = plan.some((r) => /hashed SubPlan/.test(String(r['QUERY PLAN'])));
    console.log(
      `${n.toLocaleString('en-US')} deliveries: ${Object.entries(ms)
        .map(([name, t]) => `${name} ${percentile(t, 50).toFixed(0)} ms (${t.map((x) => x.toFixed(0)).join(', ')})`)
        .join('; ')}; A's plan ${hashed ? 'has a hashed SubPlan' : 'has a plain SubPlan (no hash: past work_mem)'}`,
    );
  } finally {
    await db.drop();
  }
}
