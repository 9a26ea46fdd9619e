// bench/scale.ts, axis `webhooks`: `n` webhooks, 20 to a subject (n/20 subjects); every fourth
// subject's webhooks point at receivers that accept and never answer (the sender gives up after
// 10 s), the others' at one answering 204 at once. Each webhook starts with deliveries owed (10
// for a hanging one, 2 for a healthy one, all due). Meanwhile subject A (one more webhook, at the
// healthy receiver) creates a plant every 250 ms: from each POST's answer to its delivery, p50 and
// p99; when the healthy webhooks' backlog had all arrived, from the service's start, and its
// rate (the backlog's deliveries over that time); and A's latency again in a second
// round after that (the hanging receivers alone beside it).
import { sleep, until } from './kit/process.js';
import {
  type Measure,
  type RunDb,
  call,
  expectStatus,
  hangingReceiver,
  mint,
  receiver,
  serve,
  storedSecret,
} from './kit/scale.js';
import { percentile } from './kit/stats.js';
import { seedEvents } from './scale-deliveries.js';

/** Ports the hanging webhooks are spread over: each its own origin, so its own connection pool. */
const HANGING_PORTS = 20;

export async function webhooksAxis(db: RunDb, n: number, quick: boolean): Promise<Measure[]> {
  const now = Date.now();
  const healthy = await receiver();
  const hanging = await Promise.all(Array.from({ length: HANGING_PORTS }, () => hangingReceiver()));
  try {
    const pad = db.engine === 'sqlite' ? `substr('000000000000000' || i, -15)` : `lpad(i::text, 15, '0')`;
    const hangingUrl = `CASE (i % ${HANGING_PORTS}) ${hanging.map((h, k) => `WHEN ${k} THEN '${h.url}'`).join(' ')} END`;
    const secret = storedSecret('any');
    await db.sql(
      `INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at)
       SELECT 'w' || ${pad}, 'subject' || (i / 20), ${db.engine === 'sqlite' ? 0 : 'false'},
         CASE WHEN (i / 20) % 4 = 0 THEN ${hangingUrl} ELSE '${healthy.url}' END,
         'plant.created plant.deleted', 'active', '${secret}', ${now - 86_400_000}
       FROM (${db.series(n)}) AS t`,
    );
    await seedEvents(db, 10, `'background'`, 3_600_000, now);
    await db.sql(
      `INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
       SELECT w.id, e.id, 'plant.created', 'pending', 0, ${now}, ${now} FROM webhooks w, events e
       WHERE e.id <= CASE WHEN w.url LIKE '%/hang' THEN 10 ELSE 2 END`,
    );
    if (db.engine === 'postgres') await db.sql('VACUUM ANALYZE');
    const [row] = await db.sql(
      `SELECT count(*) AS n FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id WHERE w.url NOT LIKE '%/hang'`,
    );
    const owed = Number(row!.n);
    const token = mint(db, 'subject-a', 'plants:read,plants:write,webhooks:read,webhooks:write');
    const server = await serve(db);
    const served = performance.now();
    // When the healthy webhooks' backlog (every arrival but subject A's plants) has all arrived.
    const answered = new Map<string, number>();
    let backlogDone = Infinity;
    const watch = setInterval(() => {
      let own = 0;
      for (const id of answered.keys()) if (healthy.arrivals.has(id)) own++;
      if (backlogDone === Infinity && healthy.count - own >= owed) backlogDone = performance.now() - served;
    }, 50);
    try {
      await expectStatus(
        call(server.url, 'POST', '/webhooks', token, JSON.stringify({ url: healthy.url, events: ['plant.created'] })),
        201,
      );
      await sleep(quick ? 2000 : 10_000); // the backlog under way, the hanging webhooks' attempts on the wire
      // One of A's plants, its POST's answer's time kept in `round`; then 250 ms until the next.
      const createA = async (round: Map<string, number>, id: number, name: string): Promise<void> => {
        await expectStatus(call(server.url, 'POST', '/plants', token, JSON.stringify({ id, name })), 200);
        round.set(String(id), Date.now());
        await sleep(250);
      };
      // From each POST's answer to its delivery; one not there 60 s after the round's last POST is
      // lost, and counts in the percentiles as such (∞).
      const latenciesOf = async (round: Map<string, number>, what: string): Promise<number[]> => {
        await until(() => [...round.keys()].every((id) => healthy.arrivals.has(id)), 60_000, what).catch(
          () => undefined,
        );
        return [...round].map(([id, at]) => (healthy.arrivals.get(id) ?? Infinity) - at);
      };
      const seconds = quick ? 5 : 30;
      const started = performance.now();
      for (let i = 0; performance.now() - started < seconds * 1000; i++) {
        await createA(answered, 5_000_000_000_000 + i, `a ${i}`);
      }
      const latencies = await latenciesOf(answered, "A's deliveries");
      const lost = latencies.filter((l) => l === Infinity).length;
      // A second round, once the other healthy webhooks' backlog has arrived (at most 2 minutes
      // on): subject A beside the hanging receivers alone, 40 plants a 250 ms apart (the backlog is
      // shared in turn, and at 10× it is 10× longer, so the first round measures it too).
      await until(() => backlogDone !== Infinity, 120_000, 'the healthy backlog').catch(() => undefined);
      const second = new Map<string, number>();
      if (backlogDone !== Infinity) {
        for (let i = 0; i < (quick ? 10 : 40); i++) await createA(second, 5_100_000_000_000 + i, `a2 ${i}`);
      }
      const after = second.size === 0 ? [] : await latenciesOf(second, "A's second round");
      return [
        {
          name: "A's first round (a plant every 250 ms for 30 s), POST's answer to delivery: p50",
          value: percentile(latencies, 50),
          unit: 'ms',
          perOp: true,
        },
        { name: 'first round: p99', value: percentile(latencies, 99), unit: 'ms', perOp: true },
        {
          name: "A's second round (40 plants), once the healthy backlog had arrived: p50",
          value: percentile(after, 50),
          unit: 'ms',
          perOp: true,
        },
        { name: 'second round: p99', value: percentile(after, 99), unit: 'ms', perOp: true },
        { name: "of A's first round, not delivered 60 s after the last", value: lost, unit: '', perOp: true },
        {
          name: "the healthy webhooks' backlog (2 deliveries each): all delivered, from the start",
          value: backlogDone,
          unit: 'ms',
          perOp: false,
        },
        {
          name: "the healthy backlog's delivery rate (its deliveries ÷ that time)",
          value: (owed / backlogDone) * 1000,
          unit: '/s',
          perOp: true,
        },
      ];
    } finally {
      clearInterval(watch);
      await server.stop();
    }
  } finally {
    await healthy.close();
    for (const h of hanging) await h.close();
  }
}
