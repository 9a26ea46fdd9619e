// bench/scale.ts, axis `streams`: `n` SSE streams open on one instance (5 per token, the most a
// token may hold: n/5 tokens made through the store), held by this process. The service's memory
// and open files with them; its CPU at idle (the per-second checks of every stream's token); then
// one event at a time (5 of them) fanned out to every stream: from the POST sent to each stream's
// `id:` line, p50 and p99 over all of them.
import { readdirSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { hashToken, mintToken } from '../src/auth/token.js';
import { cpuMsOf, percentile, rss, sleep } from './harness.js';
import { type Measure, type RunDb, call, expectStatus, mint, serve, until } from './scale-kit.js';

const EVENTS = 5;

export async function streamsAxis(db: RunDb, n: number, quick: boolean): Promise<Measure[]> {
  const store = await db.openStore();
  const tokens: string[] = [];
  try {
    for (let i = 0; i < Math.ceil(n / 5); i++) {
      const { id, token } = mintToken();
      await store.createToken({
        id,
        secretHash: hashToken(token),
        subject: 'fan',
        scopes: ['plants:read'],
        createdAt: Date.now(),
        expiresAt: null,
        revokedAt: null,
      });
      tokens.push(token);
    }
  } finally {
    await store.close();
  }
  const writer = mint(db, 'fan', 'plants:read,plants:write');
  const server = await serve(db);
  const pid = server.child.pid!;
  const requests: ClientRequest[] = [];
  try {
    await expectStatus(call(server.url, 'POST', '/plants', writer, JSON.stringify({ id: 1, name: 'warm-up' })), 200);
    await sleep(1000);
    const rssBefore = rss(pid);
    const fdsBefore = readdirSync(`/proc/${pid}/fd`).length;
    /** Per event id, when each stream saw it. */
    const seen = new Map<string, number[]>();
    let open = 0;
    const openOne = (token: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const req = request(`${server.url}/events`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
          if (res.statusCode !== 200) return reject(new Error(`a stream answered ${res.statusCode}`));
          open += 1;
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            const at = performance.now();
            for (const m of chunk.matchAll(/^id: (\d+)$/gm)) {
              const list = seen.get(m[1]!) ?? [];
              list.push(at);
              seen.set(m[1]!, list);
            }
          });
          res.on('error', () => {});
          resolve();
        });
        req.on('error', (e) => (open < n ? reject(e) : undefined));
        req.end();
        requests.push(req);
      });
    for (let i = 0; i < n; i += 100)
      await Promise.all(
        Array.from({ length: Math.min(100, n - i) }, (_, j) => openOne(tokens[Math.floor((i + j) / 5)]!)),
      );
    await sleep(2000);
    const rssWith = rss(pid);
    const fds = readdirSync(`/proc/${pid}/fd`).length;
    const idleSeconds = quick ? 3 : 10;
    const cpu = cpuMsOf(pid);
    await sleep(idleSeconds * 1000);
    const idleCpu = (cpuMsOf(pid) - cpu) / idleSeconds;

    const latencies: number[] = [];
    for (let e = 0; e < EVENTS; e++) {
      const sent = performance.now();
      await expectStatus(
        call(server.url, 'POST', '/plants', writer, JSON.stringify({ id: 100 + e, name: `fan-out ${e}` })),
        200,
      );
      const arrivals = (): number[] => [...seen.values()][0] ?? [];
      await until(() => arrivals().length >= n, 60_000, 'the event on every stream');
      if (seen.size !== 1) throw new Error(`streams saw ${seen.size} events, not one`);
      latencies.push(...arrivals().map((at) => at - sent));
      seen.clear();
      await sleep(500);
    }
    return [
      { name: 'service RSS with every stream open', value: rssWith, unit: 'MiB', perOp: false },
      { name: 'RSS per stream', value: ((rssWith - rssBefore) / n) * 1024, unit: 'KiB', perOp: true },
      { name: 'open files of the service (fds), streams open', value: fds, unit: '', perOp: false },
      { name: 'open files per stream', value: (fds - fdsBefore) / n, unit: '', perOp: true },
      { name: 'CPU at idle, every stream open', value: idleCpu, unit: 'ms/s', perOp: false },
      { name: 'CPU at idle per 1,000 streams', value: (idleCpu / n) * 1000, unit: 'ms/s', perOp: true },
      {
        name: `fan-out of one event to every stream (${EVENTS} events): p50`,
        value: percentile(latencies, 50),
        unit: 'ms',
        perOp: false,
      },
      { name: 'fan-out: p99', value: percentile(latencies, 99), unit: 'ms', perOp: false },
      {
        name: 'fan-out: p99 per 1,000 streams',
        value: (percentile(latencies, 99) / n) * 1000,
        unit: 'ms',
        perOp: true,
      },
    ];
  } finally {
    for (const req of requests) req.destroy();
    await server.stop();
  }
}
