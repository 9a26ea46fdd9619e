import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { children, sleep } from './kit/process.js';

const THIS = fileURLToPath(import.meta.url);

// The load generators of bench/events.ts: this file run as a child process pinned to core 1
// (`event-load.ts pace` or `event-load.ts feed`), with its arguments as JSON in BENCH_ROLE and its
// result as JSON in the file BENCH_ROLE.out names; bench/events.ts starts them with role().

export interface PaceArgs {
  port: number;
  token: string;
  rate: number;
  seconds: number;
  prefix: string;
}
export interface PaceResult {
  /** [plant id, sent (Date.now()), answered (Date.now()), status] of each create. */
  results: Array<[string, number, number, number]>;
  /** How late the generator sent its most delayed request against its even schedule. */
  maxLagMs: number;
}

export interface FeedArgs {
  port: number;
  tokens: string[];
  streams: number;
  perToken: number;
  events: number;
  token: string;
  prefix: string;
}
export interface FeedResult {
  opened: number;
  openMs: number;
  /** When each create was sent and answered (performance.now() of the feed process). */
  sent: number[];
  answered: number[];
  /** Per stream, per event: when it arrived (performance.now()), or -1. */
  arrivals: number[][];
}

/**
 * Runs a load generator; `onOpen` runs when it prints "open" (the feed's streams are all open),
 * and the generator goes on when it returns.
 */
export async function role<T>(
  dir: string,
  name: string,
  args: object,
  timeoutMs: number,
  onOpen?: () => Promise<void>,
): Promise<T> {
  const out = join(dir, `${name}-${Date.now()}.json`);
  const child = spawn('taskset', ['-c', '1', process.execPath, ...process.execArgv, THIS, name], {
    env: { ...process.env, BENCH_ROLE: JSON.stringify({ ...args, out }) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.add(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  try {
    const lines = createInterface({ input: child.stdout });
    const exited = once(child, 'exit');
    for await (const line of lines) {
      if (line === 'open') {
        await onOpen?.();
        child.stdin.write('go\n');
      }
    }
    const [code] = (await exited) as [number | null];
    if (code !== 0) throw new Error(`the ${name} load generator exited with ${code}`);
    return JSON.parse(readFileSync(out, 'utf8')) as T;
  } finally {
    clearTimeout(timer);
    children.delete(child);
  }
}

/** Keep-alive connections the paced client opens before its schedule starts. */
const OPEN_CONNECTIONS = 64;

/** Sends `rate` creates a second, evenly, for `seconds`, whatever the answers' latency (open loop). */
async function pace({ port, token, rate, seconds, prefix }: PaceArgs): Promise<PaceResult> {
  // fifo: every open connection is used in turn, so none sits idle past the server's keep-alive timeout.
  const agent = new Agent({ keepAlive: true, maxSockets: 256, scheduling: 'fifo' });
  const total = rate * seconds;
  const results: PaceResult['results'] = [];
  let maxLagMs = 0;
  // The connections first, kept alive: opening dozens in the first milliseconds of the schedule
  // is the client's start, not the service's steady state.
  await Promise.all(
    Array.from(
      { length: OPEN_CONNECTIONS },
      () =>
        new Promise<void>((opened, fail) => {
          const req = httpRequest({ agent, host: '127.0.0.1', port, path: '/healthz' }, (res) => {
            res.resume();
            res.on('end', opened);
          });
          req.on('error', fail);
          req.end();
        }),
    ),
  );
  await new Promise<void>((done, fail) => {
    const start = performance.now();
    let sent = 0;
    const fire = (i: number): void => {
      const id = `${prefix}${String(i).padStart(9, '0')}`;
      const body = `{"id":${id},"name":"paced plant"}`;
      const at = Date.now();
      const req = httpRequest(
        {
          agent,
          host: '127.0.0.1',
          port,
          path: '/plants',
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            results.push([id, at, Date.now(), res.statusCode ?? 0]);
            if (results.length === total) done();
          });
        },
      );
      req.on('error', fail);
      req.end(body);
    };
    const tick = (): void => {
      const elapsed = performance.now() - start;
      const due = Math.min(total, Math.floor((elapsed * rate) / 1000) + 1);
      if (due > sent + 1) maxLagMs = Math.max(maxLagMs, elapsed - (sent * 1000) / rate);
      while (sent < due) fire(sent++);
      if (sent < total) setTimeout(tick, 1);
    };
    tick();
  });
  agent.destroy();
  results.sort((a, b) => a[1] - b[1]);
  return { results, maxLagMs };
}

/** Opens the streams, says "open", waits for "go", then creates `events` plants 1 s apart. */
async function feedRole(a: FeedArgs): Promise<FeedResult> {
  const sockets: Socket[] = [];
  const arrivals = Array.from({ length: a.streams }, () => new Array<number>(a.events).fill(-1));
  const eventOf = new Map<string, number>();
  for (let k = 0; k < a.events; k++) eventOf.set(`${a.prefix}${String(k).padStart(9, '0')}`, k);
  let received = 0;

  const open = (i: number): Promise<void> =>
    new Promise((opened, fail) => {
      const socket = connect(a.port, '127.0.0.1');
      sockets.push(socket);
      socket.setEncoding('utf8');
      let buffer = '';
      let connected = false;
      socket.on('data', (chunk: string) => {
        const at = performance.now();
        buffer += chunk;
        if (!connected) {
          if (!buffer.includes(': connected')) {
            if (buffer.includes('\r\n\r\n') && !buffer.startsWith('HTTP/1.1 200'))
              fail(new Error(`stream ${i}: ${buffer.slice(0, 200)}`));
            return;
          }
          connected = true;
          opened();
        }
        const end = buffer.lastIndexOf('\n');
        if (end < 0) return;
        for (const m of buffer.slice(0, end).matchAll(/^data: \{"id":(\d+)/gm)) {
          const k = eventOf.get(m[1]!);
          if (k !== undefined && arrivals[i]![k]! < 0) {
            arrivals[i]![k] = at;
            received += 1;
          }
        }
        buffer = buffer.slice(end + 1);
      });
      socket.on('error', fail);
      socket.on('close', () => {
        if (!connected) fail(new Error(`stream ${i} closed before it was connected: ${buffer.slice(0, 200)}`));
      });
      socket.write(
        `GET /events HTTP/1.1\r\nHost: 127.0.0.1:${a.port}\r\nAuthorization: Bearer ${a.tokens[Math.floor(i / a.perToken)]}\r\n` +
          'Accept: text/event-stream\r\n\r\n',
      );
    });

  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (next < a.streams) await open(next++);
    }),
  );
  const openMs = performance.now() - started;
  process.stdout.write('open\n');
  await once(createInterface({ input: process.stdin }), 'line');

  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sent: number[] = [];
  const answered: number[] = [];
  for (const [id, k] of eventOf) {
    const body = `{"id":${id},"name":"feed plant"}`;
    await new Promise<void>((done, fail) => {
      sent[k] = performance.now();
      const req = httpRequest(
        {
          agent,
          host: '127.0.0.1',
          port: a.port,
          path: '/plants',
          method: 'POST',
          headers: {
            authorization: `Bearer ${a.token}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          answered[k] = performance.now();
          res.resume();
          if (res.statusCode !== 200) fail(new Error(`POST answered ${res.statusCode}`));
          else res.on('end', done);
        },
      );
      req.on('error', fail);
      req.end(body);
    });
    await sleep(1000);
  }
  const deadline = Date.now() + 5000;
  while (received < a.streams * a.events && Date.now() < deadline) await sleep(20);
  agent.destroy();
  for (const socket of sockets) socket.destroy();
  return { opened: sockets.length, openMs, sent, answered, arrivals };
}

const which = process.argv[2];
if (process.argv[1] !== undefined && resolve(process.argv[1]) === THIS && (which === 'pace' || which === 'feed')) {
  const args = JSON.parse(process.env.BENCH_ROLE ?? '{}') as PaceArgs & FeedArgs & { out: string };
  const result = which === 'pace' ? await pace(args) : await feedRole(args);
  writeFileSync(args.out, JSON.stringify(result)); // a file: a pipe may not be drained before exit
  process.exit(0);
}
