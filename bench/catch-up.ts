// node --import tsx bench/catch-up.ts [--engine sqlite|postgres] [--events 60000] [--runs 3]
//
// The change feed's catch-up, cold: `--events` events of one owner seeded in the log, then a
// client resumes from the oldest (GET /events?after=0) and reads as fast as it can, while another
// connection asks GET /healthz every 10 ms. Measured per run: events received on the one
// connection and whether it stayed open, the time to the first event and to the last, and
// /healthz's latency meanwhile (median, p99, max). The service is the built one (`npm run build`
// first), pinned to core 0; each run has a fresh service on the same seeded database.
import { loadavg } from 'node:os';
import { Pool } from 'undici';
import { arg, sleep } from './kit/process.js';
import { type Engine, createRunDb, mint, serve } from './kit/scale.js';
import { median, percentile } from './kit/stats.js';
import { seedEvents } from './scale-deliveries.js';

const engine = arg('engine', 'sqlite') as Engine;
const EVENTS = Number(arg('events', '60000'));
const RUNS = Number(arg('runs', '3'));

const db = await createRunDb(engine);
try {
  await seedEvents(db, EVENTS, "'alice'", 60_000, Date.now());
  const token = mint(db, 'alice', 'plants:read');
  for (let run = 1; run <= RUNS; run++) {
    const server = await serve(db);
    try {
      const health = new Pool(server.url, { connections: 1 });
      const feed = new Pool(server.url, { connections: 1 });
      const healthMs: number[] = [];
      let following = true;
      const prober = (async () => {
        while (following) {
          const started = performance.now();
          const { body } = await health.request({ method: 'GET', path: '/healthz' });
          await body.dump();
          healthMs.push(performance.now() - started);
          await sleep(10);
        }
      })();
      const started = performance.now();
      const { body } = await feed.request({
        method: 'GET',
        path: '/events?after=0',
        headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
      });
      let received = 0;
      let firstMs: number | undefined;
      let lastMs = 0;
      let ended = false;
      let tail = '';
      const reading = (async () => {
        for await (const chunk of body) {
          const text = tail + (chunk as Buffer).toString('latin1');
          const cut = text.lastIndexOf('\n');
          const whole = text.slice(0, cut + 1);
          tail = text.slice(cut + 1);
          const ids = whole.match(/^id: /gm)?.length ?? 0;
          if (ids > 0) {
            received += ids;
            firstMs ??= performance.now() - started;
            lastMs = performance.now() - started;
          }
          if (received >= EVENTS) break;
        }
        ended = received < EVENTS;
      })();
      const deadline = sleep(120_000).then(() => 'late' as const);
      const outcome = await Promise.race([reading.then(() => 'done' as const), deadline]);
      following = false;
      await prober;
      body.destroy();
      await health.close();
      await feed.close().catch(() => {});
      healthMs.sort((a, b) => a - b);
      console.log(
        JSON.stringify({
          engine,
          run,
          events: EVENTS,
          received,
          streamEndedEarly: ended || outcome === 'late',
          firstEventMs: Math.round(firstMs ?? -1),
          lastEventMs: Math.round(lastMs),
          healthz: {
            asked: healthMs.length,
            medianMs: Number(median(healthMs).toFixed(1)),
            p99Ms: Number(percentile(healthMs, 99).toFixed(1)),
            maxMs: Number(healthMs.at(-1)!.toFixed(1)),
          },
          loadavg: loadavg().map((l) => Number(l.toFixed(2))),
        }),
      );
    } finally {
      await server.stop();
    }
  }
} finally {
  await db.drop();
}
