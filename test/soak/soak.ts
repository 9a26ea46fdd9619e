// npm run test:soak — a bounded soak: the real server under steady mixed load, with zero errors
// and resident memory flat after warm-up.
//
// Starts `plant-store serve` (SQLite in a temporary file, rate limiting off) and drives it with
// SOAK_CONNECTIONS concurrent clients (default 16) for SOAK_SECONDS (default 60; longer locally,
// e.g. SOAK_SECONDS=1800): creates with unique ids, lists (with and without a tag, following the
// Link header), and deletes of created plants. Every answer must be the expected 2xx. Resident
// memory (VmRSS) is sampled every second; after the warm-up (the first quarter), the mean of the
// last half of the samples may exceed the mean of the first half by at most 10 MB or 10 %.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { BIN } from '../process.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 16);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-soak-'));
const env = { ...process.env, DATABASE_URL: `sqlite:${join(dir, 'soak.db')}`, RATE_LIMIT: 'off', PORT: '0' };

function cli(args: string[]): string {
  return execFileSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' });
}

async function startServer(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [BIN, 'serve'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
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
  return { child, url };
}

const rssMb = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

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
  const samples: number[] = [];
  const until = Date.now() + SECONDS * 1000;
  const sampler = (async () => {
    while (Date.now() < until) {
      await sleep(1000);
      samples.push(rssMb(pid));
      if (samples.length % 10 === 0) {
        console.error(
          `${samples.length} s: ${requests.toLocaleString('en-US')} requests, RSS ${samples.at(-1)!.toFixed(1)} MB`,
        );
      }
    }
  })();
  await Promise.all([...Array.from({ length: CONNECTIONS }, () => client(started.url, token, until)), sampler]);

  const steady = samples.slice(Math.ceil(samples.length / 4));
  const half = Math.floor(steady.length / 2);
  const [early, late] = [mean(steady.slice(0, half)), mean(steady.slice(half))];
  const growth = late - early;
  const allowed = Math.max(10, early * 0.1);
  console.log(
    `soak: ${SECONDS} s, ${CONNECTIONS} clients, ${requests.toLocaleString('en-US')} requests ` +
      `(${Math.round(requests / SECONDS).toLocaleString('en-US')}/s), ${failures.length} errors; ` +
      `RSS after warm-up ${early.toFixed(1)} MB → ${late.toFixed(1)} MB (max ${Math.max(...samples).toFixed(1)} MB, ` +
      `allowed growth ${allowed.toFixed(1)} MB)`,
  );
  if (failures.length > 0) failures.unshift('requests failed during the soak:');
  if (growth > allowed) failures.push(`resident memory grew by ${growth.toFixed(1)} MB after warm-up`);
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
