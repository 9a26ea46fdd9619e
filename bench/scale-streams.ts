// bench/scale.ts, axis `streams`: `n` SSE streams open on one instance (5 per token, the most a
// token may hold: n/5 tokens made through the store), held by this process. The service's memory
// and open files with them; its CPU at idle (the per-second checks of every stream's token); then
// one event at a time (5 of them) fanned out to every stream: from the POST sent to each stream's
// `id:` line, p50 and p99 over all of them. The streams are read as plain sockets (the `id:` lines
// found in the bytes, no HTTP parser): this one process receives all n of them, and what it spends
// per stream comes after the service's work in every arrival it times. So the service's own time
// is measured too: its debug line `change feed: events written to the streams` (LOG_LEVEL=debug),
// logged once every stream's write has gone out, against the POST; and both processes' CPU per event.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { join } from 'node:path';
import { hashToken, mintToken } from '../src/auth/token.js';
import { cpuMsOf, rss, sleep, until } from './kit/process.js';
import { type Measure, type RunDb, call, expectStatus, mint, serve } from './kit/scale.js';
import { percentile } from './kit/stats.js';

const EVENTS = 5;
const ID_LINE = /^id: (\d+)\r?$/gm;
const FAN_OUT = 'change feed: events written to the streams';

/** The service's log (the harness writes it to the run's folder): when its fan-out of each event ended, and its CPU. */
function fanOuts(dir: string): Map<string, { time: number; cpuMs: number }> {
  const logs = readdirSync(dir).filter((f) => /^child-.*\.log$/.test(f));
  const newest = logs.sort((a, b) => statSync(join(dir, b)).mtimeMs - statSync(join(dir, a)).mtimeMs)[0];
  const ends = new Map<string, { time: number; cpuMs: number }>();
  if (newest === undefined) return ends;
  for (const line of readFileSync(join(dir, newest), 'utf8').split('\n')) {
    if (!line.includes(FAN_OUT)) continue;
    const { event, time, cpuMs } = JSON.parse(line) as { event: string; time: number; cpuMs: number };
    ends.set(event, { time, cpuMs });
  }
  return ends;
}

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
  const server = await serve(db, { LOG_LEVEL: 'debug' });
  const pid = server.child.pid!;
  const sockets: Socket[] = [];
  try {
    await expectStatus(call(server.url, 'POST', '/plants', writer, JSON.stringify({ id: 1, name: 'warm-up' })), 200);
    await sleep(1000);
    const rssBefore = rss(pid);
    const fdsBefore = readdirSync(`/proc/${pid}/fd`).length;
    // The service's CPU at idle with no stream open: a fixed cost, taken out of the per-stream row.
    const idleSeconds = quick ? 3 : 10;
    const cpuAlone = cpuMsOf(pid);
    await sleep(idleSeconds * 1000);
    const idleCpuAlone = (cpuMsOf(pid) - cpuAlone) / idleSeconds;
    /** Per event id, when each stream saw it. */
    const seen = new Map<string, number[]>();
    let open = 0;
    const openOne = (token: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const socket = connect(server.port, '127.0.0.1');
        sockets.push(socket);
        let head = true;
        socket.on('data', (chunk: Buffer) => {
          const at = performance.now();
          const text = chunk.toString('latin1');
          if (head) {
            head = false;
            if (!text.startsWith('HTTP/1.1 200 ')) return reject(new Error(`a stream answered ${text.slice(0, 12)}`));
            open += 1;
            resolve();
          }
          for (const m of text.matchAll(ID_LINE)) {
            const list = seen.get(m[1]!) ?? [];
            list.push(at);
            seen.set(m[1]!, list);
          }
        });
        socket.on('error', (e) => (open < n ? reject(e) : undefined));
        socket.write(
          `GET /events HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\nauthorization: Bearer ${token}\r\n\r\n`,
        );
      });
    const latencies: number[] = [];
    /** Per event: its id, and when the POST was sent (epoch ms, as the service's log). */
    const sent: Array<{ id: string; at: number }> = [];
    let clientCpu = 0;
    let nextId = 100;
    /** EVENTS creates, each awaited on every open stream; the latencies (and the rest) kept when `kept`. */
    const fanOut = async (streams: number, kept: boolean): Promise<number[]> => {
      const these: number[] = [];
      for (let e = 0; e < EVENTS; e++) {
        const cpuBefore = process.cpuUsage();
        const sentAt = Date.now();
        const started = performance.now();
        const id = nextId++;
        await expectStatus(
          call(server.url, 'POST', '/plants', writer, JSON.stringify({ id, name: `fan-out ${id}` })),
          200,
        );
        const arrivals = (): number[] => [...seen.values()][0] ?? [];
        await until(() => arrivals().length >= streams, 60_000, 'the event on every stream');
        if (seen.size !== 1) throw new Error(`streams saw ${seen.size} events, not one`);
        const client = process.cpuUsage(cpuBefore);
        these.push(...arrivals().map((at) => at - started));
        if (kept) {
          clientCpu += (client.user + client.system) / 1000;
          sent.push({ id: [...seen.keys()][0]!, at: sentAt });
        }
        seen.clear();
        await sleep(500);
      }
      return these;
    };
    // One stream first: the fan-out's fixed cost (the create, its commit, the wake-up), taken out of
    // the per-stream row.
    await openOne(tokens[0]!);
    const p99One = percentile(await fanOut(1, false), 99);
    for (let i = 1; i < n; i += 100)
      await Promise.all(
        Array.from({ length: Math.min(100, n - i) }, (_, j) => openOne(tokens[Math.floor((i + j) / 5)]!)),
      );
    await sleep(2000);
    const rssWith = rss(pid);
    const fds = readdirSync(`/proc/${pid}/fd`).length;
    const cpu = cpuMsOf(pid);
    await sleep(idleSeconds * 1000);
    const idleCpu = (cpuMsOf(pid) - cpu) / idleSeconds;

    latencies.push(...(await fanOut(n, true)));
    await sleep(200); // the service's log lines are written a turn later
    const logged = fanOuts(db.dir);
    const own = sent.map(({ id, at }) => (logged.get(id)?.time ?? Number.NaN) - at);
    const serviceCpu = sent.reduce((sum, { id }) => sum + (logged.get(id)?.cpuMs ?? Number.NaN), 0);
    return [
      { name: 'service RSS with every stream open', value: rssWith, unit: 'MiB', perOp: false },
      { name: 'RSS per stream', value: ((rssWith - rssBefore) / n) * 1024, unit: 'KiB', perOp: true },
      { name: 'open files of the service (fds), streams open', value: fds, unit: '', perOp: false },
      { name: 'open files per stream', value: (fds - fdsBefore) / n, unit: '', perOp: true },
      { name: 'CPU at idle, every stream open', value: idleCpu, unit: 'ms/s', perOp: false },
      {
        name: 'CPU at idle per 1,000 streams (above the service alone)',
        value: ((idleCpu - idleCpuAlone) / n) * 1000,
        unit: 'ms/s',
        perOp: true,
      },
      {
        name: `fan-out of one event to every stream (${EVENTS} events): p50`,
        value: percentile(latencies, 50),
        unit: 'ms',
        perOp: false,
      },
      { name: 'fan-out: p99', value: percentile(latencies, 99), unit: 'ms', perOp: false },
      {
        name: 'fan-out: p99 per 1,000 streams (above one stream)',
        value: ((percentile(latencies, 99) - p99One) / Math.max(1, n - 1)) * 1000,
        unit: 'ms',
        perOp: true,
      },
      {
        name: "fan-out: the service's own time, POST to its last write (its log), slowest event",
        value: Math.max(...own),
        unit: 'ms',
        perOp: false,
      },
      {
        name: 'fan-out: service CPU per event (its log: from the read to the last write)',
        value: serviceCpu / EVENTS,
        unit: 'ms',
        perOp: false,
      },
      {
        name: 'fan-out: client CPU per event (receiving every stream)',
        value: clientCpu / EVENTS,
        unit: 'ms',
        perOp: false,
      },
    ];
  } finally {
    for (const socket of sockets) socket.destroy();
    await server.stop();
  }
}
