// bench/scale.ts, axis `deliveries`: `n` pending deliveries of one webhook whose receiver was away
// (a day of them, all due): a claim's time per batch, the backlog metric's read, `recover` of all
// of them (failed first), then the rate once the receiver is back and the attempt log it leaves.
// BENCH_SCALE_DELIVERIES=recover measures the recover alone (the same seed, no claims, no rate).
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Store } from '../src/store/store.js';
import { until } from './kit/process.js';
import { type Measure, type RunDb, receiver, serve, storedSecret } from './kit/scale.js';
import { percentile } from './kit/stats.js';

const WEBHOOK = 'scaleaway0000000';
const DAY = 86_400_000;

/** `n` events (ids 1..n) of `owner` (an SQL expression of i), made evenly over `spanMs` up to now, all fanned out already. */
export async function seedEvents(db: RunDb, n: number, owner: string, spanMs: number, now: number): Promise<void> {
  await db.sql(
    `INSERT INTO events (id, type, owner, plant_id, payload, created_at)
     SELECT i, 'plant.created', ${owner}, 7000000000000000000 + i,
       '{"id":' || (7000000000000000000 + i) || ',"name":"plant ' || i || '","tag":"scale"}',
       ${now - spanMs} + (CAST(i AS BIGINT) * ${spanMs} / ${n})
     FROM (${db.series(n)}) AS t`,
  );
  await db.sql(`UPDATE delivery_cursor SET fanned_through = ${n}`);
  if (db.engine === 'postgres') await db.sql(`SELECT setval('events_id_seq', ${n})`);
}

/** Whether the schema copies each delivery's plant (order per plant): a checkout before it has no such column. */
export async function deliveriesHavePlant(db: RunDb): Promise<boolean> {
  const [row] = await db.sql(
    db.engine === 'postgres'
      ? "SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'deliveries' AND column_name = 'plant_id'"
      : "SELECT count(*) AS n FROM pragma_table_info('deliveries') WHERE name = 'plant_id'",
  );
  return Number(row?.n) > 0;
}

export async function seedDeliveries(db: RunDb, n: number, webhook: string, now: number): Promise<void> {
  // As the fan-out makes them: each with its event's plant, where the schema keeps it.
  const plant = (await deliveriesHavePlant(db)) ? ['plant_id, ', 'plant_id, '] : ['', ''];
  await db.sql(
    `INSERT INTO deliveries (id, webhook_id, event_id, ${plant[0]}type, status, attempts, next_attempt_at, created_at)
     SELECT i, '${webhook}', i, ${plant[1]}'plant.created', 'pending', 0, ${now - 1000}, created_at FROM
     (SELECT id AS i, plant_id, created_at FROM events WHERE id <= ${n}) AS t`,
  );
  if (db.engine === 'postgres') await db.sql(`SELECT setval('deliveries_id_seq', ${n})`);
}

export async function deliveriesAxis(db: RunDb, n: number, quick: boolean): Promise<Measure[]> {
  const now = Date.now();
  const back = await receiver();
  try {
    const store = await db.openStore();
    try {
      await store.createWebhook(
        {
          id: WEBHOOK,
          owner: 'away',
          allPlants: false,
          url: back.url,
          events: ['plant.created'],
          status: 'active',
          secret: storedSecret(WEBHOOK),
          createdAt: now - 2 * DAY,
        },
        20,
      );
      await seedEvents(db, n, `'away'`, DAY, now);
      await seedDeliveries(db, n, WEBHOOK, now);
      if (db.engine === 'postgres') await db.sql('VACUUM ANALYZE');
      if (process.env.BENCH_SCALE_DELIVERIES === 'recover') return await recoverAll(db, store, n);

      // A claim as the dispatcher makes it: 256 at most, 32 of one webhook.
      const claims: number[] = [];
      for (let i = 0; i < 21; i++) {
        const started = performance.now();
        const claimed = await store.claimDeliveries({
          holder: 'scale-bench',
          leaseMs: 60_000,
          limit: 256,
          perWebhook: 32,
          busy: new Map(),
        });
        if (i > 0) claims.push(performance.now() - started);
        if (claimed.length !== 32) throw new Error(`a claim took ${claimed.length} deliveries`);
      }
      await store.releaseLeases('scale-bench');
      const backlogs: number[] = [];
      for (let i = 0; i < 11; i++) {
        const started = performance.now();
        const backlog = await store.webhookBacklog();
        if (i > 0) backlogs.push(performance.now() - started);
        if (backlog.pending !== n) throw new Error(`the backlog says ${backlog.pending}`);
      }
      const recovered = await recoverAll(db, store, n);
      // BENCH_SCALE_VACUUM=1: what autovacuum would do after a recover that rewrote every row, before
      // the rate is measured (PostgreSQL; the A/B of the rate's fall at a million).
      if (db.engine === 'postgres' && process.env.BENCH_SCALE_VACUUM === '1') await db.sql('VACUUM ANALYZE');

      // The receiver is back: the service works through the backlog.
      const server = await serve(db);
      let rate = 0;
      try {
        await until(() => back.count > 0, 60_000, 'the first delivery');
        // The same share of the backlog at every size (a whole small backlog against the start of a
        // large one would compare its tail, when the claims find little, with a full queue).
        const from = back.count;
        const share = Math.ceil(n / 10);
        const started = performance.now();
        // At most 2 minutes: a slower service is measured over what arrived by then.
        await until(() => back.count - from >= share, quick ? 60_000 : 120_000, `the first ${share} deliveries`).catch(
          () => undefined,
        );
        rate = ((back.count - from) / (performance.now() - started)) * 1000;
      } finally {
        await server.stop();
      }
      const attempts = Number((await db.sql('SELECT count(*) AS n FROM delivery_attempts'))[0]!.n);
      const attemptBytes =
        db.engine === 'postgres'
          ? Number((await db.sql(`SELECT pg_total_relation_size('delivery_attempts') AS b`))[0]!.b)
          : Number(
              (await db.sql(`SELECT sum(pgsize) AS b FROM dbstat WHERE name LIKE '%delivery_attempts%'`))[0]!.b ?? 0,
            );
      return [
        { name: 'claim of a batch (32 of one webhook): p50', value: percentile(claims, 50), unit: 'ms', perOp: true },
        { name: 'the backlog metric (webhookBacklog): p50', value: percentile(backlogs, 50), unit: 'ms', perOp: true },
        ...recovered,
        {
          name: 'deliveries/s once the receiver is back (the first 10 % of the backlog)',
          value: rate,
          unit: '/s',
          perOp: true,
        },
        {
          name: 'attempt log: bytes per attempt (table and indexes)',
          value: attemptBytes / attempts,
          unit: 'B',
          perOp: true,
        },
      ];
    } finally {
      await store.close();
    }
  } finally {
    await back.close();
  }
}

/**
 * Every delivery failed, then `recover` of all of them (in parts, each its own transaction; the
 * missed-events walk reads the n events and makes none), and how late the event loop ran meanwhile.
 */
async function recoverAll(db: RunDb, store: Store, n: number): Promise<Measure[]> {
  await db.sql(`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, attempts = 8`);
  const stalls = monitorEventLoopDelay({ resolution: 1 });
  stalls.enable();
  const started = performance.now();
  const recovered = await store.recoverDeliveries(WEBHOOK, null, 0);
  const ms = performance.now() - started;
  stalls.disable();
  if (recovered?.requeued !== n || recovered.created !== 0) throw new Error(`recover did ${JSON.stringify(recovered)}`);
  return [
    { name: '`recover` of every failed delivery: in parts', value: ms, unit: 'ms', perOp: false },
    { name: '`recover`: per delivery', value: (ms / n) * 1000, unit: 'µs', perOp: true },
    // SQLite's parts run on the event loop: the delay a timer saw while the recover ran.
    {
      name: '`recover`: event-loop delay while it runs, p99',
      value: stalls.percentile(99) / 1e6,
      unit: 'ms',
      perOp: true,
    },
    { name: '`recover`: event-loop delay while it runs, max', value: stalls.max / 1e6, unit: 'ms', perOp: true },
  ];
}
