// node --import tsx bench/forged-tokens.ts [--engine postgres|sqlite] [--count 20000]
//
// Unauthenticated load: `--count` distinct forged API tokens (well formed, checksum valid, unknown)
// sent from one address (127.0.0.1) by 16 connections as fast as the service answers, while a real
// client on another address (127.0.0.2) sends GET /plants with a real token every 20 ms. Measured:
// how many times the token store was asked (PostgreSQL: idx_scan + seq_scan of api_tokens, read
// from pg_stat_user_tables before and after), the answers by status, the real client's statuses
// and latency (median, p99, max) during the flood and alone before it. The service is the built
// one (`npm run build` first), pinned to core 0; this process, the load, runs beside it.
import { loadavg } from 'node:os';
import { Pool } from 'undici';
import { mintToken } from '../src/auth/token.js';
import { arg, sleep } from './kit/process.js';
import { type Engine, createRunDb, mint, serve } from './kit/scale.js';
import { median, percentile } from './kit/stats.js';

const engine = arg('engine', 'postgres') as Engine;
const COUNT = Number(arg('count', '20000'));
const CONNECTIONS = 16;

const db = await createRunDb(engine);
const server = await serve(db);
try {
  const token = mint(db, 'alice', 'plants:read');
  const lookups = async (): Promise<number | undefined> => {
    if (engine !== 'postgres') return undefined;
    await sleep(11_000); // an idle backend reports its table statistics within 10 s (PostgreSQL 15)
    const [row] = await db.sql(
      "SELECT coalesce(idx_scan, 0) + seq_scan AS n FROM pg_stat_user_tables WHERE relname = 'api_tokens'",
    );
    return Number(row!.n);
  };
  const flooder = new Pool(server.url, { connections: CONNECTIONS, pipelining: 1 });
  const real = new Pool(server.url, { connections: 1, connect: { localAddress: '127.0.0.2' } });

  /** The real client's requests every 20 ms while `going()`: each one's status and latency. */
  const realClient = async (going: () => boolean) => {
    const answers: Array<{ status: number; ms: number }> = [];
    while (going()) {
      const started = performance.now();
      const { statusCode, body } = await real.request({
        method: 'GET',
        path: '/plants',
        headers: { authorization: `Bearer ${token}` },
      });
      await body.dump();
      answers.push({ status: statusCode, ms: performance.now() - started });
      await sleep(20);
    }
    return answers;
  };
  const summary = (answers: Array<{ status: number; ms: number }>) => {
    const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
    const statuses = new Map<number, number>();
    for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    return {
      requests: answers.length,
      statuses: Object.fromEntries(statuses),
      medianMs: Number(median(ms).toFixed(2)),
      p99Ms: Number(percentile(ms, 99).toFixed(2)),
      maxMs: Number(ms.at(-1)!.toFixed(2)),
    };
  };

  let quiet = true;
  const stopQuiet = setTimeout(() => (quiet = false), 3000);
  const alone = await realClient(() => quiet);
  clearTimeout(stopQuiet);

  const before = await lookups();
  const statuses = new Map<number, number>();
  let sent = 0;
  let flooding = true;
  const started = performance.now();
  const duringPromise = realClient(() => flooding);
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (sent < COUNT) {
        sent++;
        const { statusCode, body } = await flooder.request({
          method: 'GET',
          path: '/plants',
          headers: { authorization: `Bearer ${mintToken().token}` },
        });
        await body.dump();
        statuses.set(statusCode, (statuses.get(statusCode) ?? 0) + 1);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  flooding = false;
  const during = await duringPromise;
  const after = await lookups();
  console.log(
    JSON.stringify(
      {
        engine,
        forged: COUNT,
        seconds: Number(seconds.toFixed(1)),
        tokenStoreLookups: before === undefined || after === undefined ? 'not counted on sqlite' : after - before,
        forgedAnswers: Object.fromEntries(statuses),
        realClientAlone: summary(alone),
        realClientDuringFlood: summary(during),
        loadavg: loadavg().map((l) => Number(l.toFixed(2))),
      },
      null,
      2,
    ),
  );
  await flooder.close();
  await real.close();
} finally {
  await server.stop();
  await db.drop();
}
