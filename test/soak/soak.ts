// npm run test:soak — a bounded soak: the real server under steady mixed load, with zero errors
// and resident memory flat after warm-up.
//
// Starts `plant-store serve` (SQLite in a temporary file, rate limiting off) and drives it with
// SOAK_CONNECTIONS concurrent clients (default 16) for SOAK_SECONDS (default 60; longer locally,
// e.g. SOAK_SECONDS=1800): creates with unique ids, lists (with and without a tag, following the
// Link header), and deletes of created plants. Every answer must be the expected 2xx.
//
// Memory: resident memory under load is a sawtooth (V8 lets garbage pile up between full
// collections, 60 MB and more at this rate), so samples taken under load say more about when the
// last collection ran than about a leak. The server therefore runs with the inspector on loopback,
// and the soak asks it for a full collection and reads process.memoryUsage() after the warm-up
// (the first quarter), at every further quarter, and once the load has stopped. From the warm-up's
// measure to the last, the JS heap still in use may grow by at most 5 MB or 10 %, and resident
// memory by at most 10 MB or 10 % plus SQLite's page cache: better-sqlite3 builds SQLite with a
// 16,000 KiB cache per connection, which fills as the database outgrows it (a soak writes about
// 1 MB of plants and events a second), and then stays full. In a 60 s run that cache is still
// filling, so its size is allowed; in a long run (SOAK_SECONDS=1800) the same fixed allowance makes
// any steady native growth show. The 1 s samples of VmRSS under load are printed, not judged.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { BIN } from '../process.js';
import { INSPECTOR_URL, Inspector, type Memory } from './inspector.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 16);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-soak-'));
const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'soak.db')}`, RATE_LIMIT: 'off', PORT: '0' };

function cli(args: string[]): string {
  return execFileSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
}

async function startServer(): Promise<{ child: ChildProcess; url: string; inspector: string }> {
  const child = spawn(process.execPath, ['--inspect=127.0.0.1:0', BIN, 'serve'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let errors = '';
  const inspector = new Promise<string>((resolve) => {
    child.stderr.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      errors += chunk.toString();
      const m = INSPECTOR_URL.exec(errors);
      if (m) resolve(m[1]!);
    });
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      out += chunk.toString();
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (!m) return;
      child.stdout.off('data', onData);
      child.stdout.resume(); // the log is read and dropped from here on
      resolve(m[1]!);
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}: ${out}`)));
  });
  return { child, url, inspector: await inspector };
}

const rssMb = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
/** The page cache SQLite gives a connection that sets none (the server sets none), in MB. */
function pageCacheMb(): number {
  const db = new Database(':memory:');
  const size = db.pragma('cache_size', { simple: true }) as number;
  const page = db.pragma('page_size', { simple: true }) as number;
  db.close();
  return (size < 0 ? -size * 1024 : size * page) / 2 ** 20;
}
const show = (m: Memory): string =>
  `RSS ${m.rssMb.toFixed(1)} MB, heap ${m.heapUsedMb.toFixed(1)} MB of ${m.heapTotalMb.toFixed(1)} MB`;

const failures: string[] = [];
let requests = 0;
let nextId = 1n;

async function expect(url: string, init: RequestInit, status: number, what: string): Promise<Response> {
  const response = await fetch(url, init);
  requests += 1;
  if (response.status !== status && failures.length < 20) {
    failures.push(`${what}: expected ${status}, got ${response.status} ${await response.text()}`);
  }
  return response;
}

async function client(url: string, token: string, until: number): Promise<void> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const mine: bigint[] = [];
  let turn = 0;
  while (Date.now() < until) {
    turn += 1;
    if (turn % 3 === 0 || mine.length === 0) {
      const id = nextId++;
      const tag = id % 2n === 0n ? ',"tag":"even"' : '';
      const body = `{"id":${id},"name":"soak plant ${id}"${tag}}`;
      await (await expect(`${url}/plants`, { method: 'POST', headers, body }, 200, `create ${id}`)).text();
      mine.push(id);
    } else if (turn % 5 === 0) {
      const id = mine.shift()!;
      await (await expect(`${url}/plants/${id}`, { method: 'DELETE', headers }, 204, `delete ${id}`)).text();
    } else {
      const query = turn % 7 === 0 ? '?limit=5&tag=even' : '?limit=20';
      const first = await expect(`${url}/plants${query}`, { headers }, 200, 'list');
      await first.text();
      const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
      if (next) await (await expect(`${url}${next}`, { headers }, 200, 'next page')).text();
    }
  }
}

let server: ChildProcess | undefined;
try {
  cli(['migrate']);
  const { token } = JSON.parse(
    cli(['token', 'create', '--subject', 'soak', '--scopes', 'plants:read,plants:write', '--json']),
  ) as { token: string };
  const started = await startServer();
  server = started.child;
  const pid = server.pid!;
  const inspector = await Inspector.connect(started.inspector);
  const samples: number[] = [];
  const start = Date.now();
  const until = start + SECONDS * 1000;
  const measures: Memory[] = [];
  const sampler = (async () => {
    let quarter = 1;
    while (Date.now() < until) {
      await sleep(1000);
      samples.push(rssMb(pid));
      if (samples.length % 10 === 0) {
        console.error(
          `${samples.length} s: ${requests.toLocaleString('en-US')} requests, RSS ${samples.at(-1)!.toFixed(1)} MB`,
        );
      }
      if (quarter < 4 && Date.now() >= start + (SECONDS * 1000 * quarter) / 4) {
        quarter += 1;
        measures.push(await inspector.memoryAfterGc());
        console.error(`after a full collection at ${samples.length} s: ${show(measures.at(-1)!)}`);
      }
    }
  })();
  await Promise.all([...Array.from({ length: CONNECTIONS }, () => client(started.url, token, until)), sampler]);
  measures.push(await inspector.memoryAfterGc());
  inspector.close();

  const [early, late] = [measures[0]!, measures.at(-1)!];
  const allowedRss = Math.max(10, early.rssMb * 0.1) + pageCacheMb();
  const allowedHeap = Math.max(5, early.heapUsedMb * 0.1);
  console.log(
    `soak: ${SECONDS} s, ${CONNECTIONS} clients, ${requests.toLocaleString('en-US')} requests ` +
      `(${Math.round(requests / SECONDS).toLocaleString('en-US')}/s), ${failures.length} errors; ` +
      `after full collections: ${measures.map(show).join(' → ')} ` +
      `(allowed growth ${allowedRss.toFixed(1)} MB RSS, ${allowedHeap.toFixed(1)} MB heap; ` +
      `under load RSS peaked at ${Math.max(...samples).toFixed(1)} MB)`,
  );
  if (failures.length > 0) failures.unshift('requests failed during the soak:');
  if (late.rssMb - early.rssMb > allowedRss) {
    failures.push(`resident memory grew by ${(late.rssMb - early.rssMb).toFixed(1)} MB after warm-up`);
  }
  if (late.heapUsedMb - early.heapUsedMb > allowedHeap) {
    failures.push(`the JS heap in use grew by ${(late.heapUsedMb - early.heapUsedMb).toFixed(1)} MB after warm-up`);
  }
  if (server.exitCode !== null) failures.push(`the server exited during the soak with ${server.exitCode}`);
} catch (error) {
  failures.push(String(error));
} finally {
  server?.kill('SIGTERM');
  if (server) await new Promise((resolve) => server!.once('exit', resolve));
  rmSync(dir, { recursive: true, force: true });
}
if (failures.length > 0) {
  console.error(failures.join('\n'));
  process.exit(1);
}
