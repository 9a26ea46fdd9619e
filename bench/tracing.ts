import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMsOf } from './kit/process.js';
import { LISTENING, mintToken } from './kit/server.js';
import { int, median } from './kit/stats.js';
import { wrk } from './kit/wrk.js';

/**
 * The A/B of tracing (BENCHMARKS.md, "Tracing"): the server's CPU time per request, and
 * its rate, for GET /plants?limit=10 and POST /plants on SQLite, in three variants, alternated:
 *
 * - `before`: another checkout's build (BENCH_BEFORE=<its root>), the code before tracing existed;
 * - `off`: this build with no OTLP endpoint (the hot path must be the same code);
 * - `on`: this build exporting every span over OTLP/HTTP to a collector in this process that
 *   reads and drops them.
 *
 * The server is pinned to core 0 and wrk (-c50) to core 1: 3 s of warm-up, then 8 s measured.
 * µs/request = the server's user + system time over the measured run / the requests answered.
 *
 * Usage: BENCH_BEFORE=/tmp/ab-before [BENCH_AFTER=<a checkout; default this one>] [BENCH_ROUNDS=3] [BENCH_VARIANTS=before,off,on] [BENCH_KINDS=get,post]
 *        node --import tsx bench/tracing.ts
 */

const here = process.env.BENCH_AFTER ?? resolve(fileURLToPath(new URL('..', import.meta.url)));
const before = process.env.BENCH_BEFORE;
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-tracing-'));

const collector = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
});
collector.listen(0, '127.0.0.1');
await once(collector, 'listening');
const collectorUrl = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;

interface Variant {
  readonly name: string;
  readonly root: string;
  readonly env: NodeJS.ProcessEnv;
}
const only = process.env.BENCH_VARIANTS?.split(',');
const kinds = (process.env.BENCH_KINDS ?? 'get,post').split(',') as Array<'get' | 'post'>;
const variants: Variant[] = [
  ...(before ? [{ name: 'before', root: before, env: {} }] : []),
  { name: 'off', root: here, env: {} },
  { name: 'on', root: here, env: { OTEL_EXPORTER_OTLP_ENDPOINT: collectorUrl } },
].filter((variant) => only === undefined || only.includes(variant.name));

async function measure(variant: Variant, kind: 'get' | 'post', round: number): Promise<{ us: number; rate: number }> {
  const database = `sqlite:${join(dir, `${variant.name}-${kind}-${round}.db`)}`;
  const env = { ...process.env, DATABASE_URL: database, RATE_LIMIT: 'off', LOG_LEVEL: 'warn', ...variant.env };
  const bin = join(variant.root, 'bin/plant-store.js');
  const token = mintToken(env, 'bench', 'plants:read,plants:write', { bin, showStderr: true });
  const child = spawn('taskset', ['-c', '0', process.execPath, bin, 'serve'], {
    env: { ...env, PORT: '0', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  const port = await new Promise<string>((done) => {
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = LISTENING.exec(out);
      if (m) done(m[1]!);
    });
  });
  const url = `http://127.0.0.1:${port}/plants${kind === 'get' ? '?limit=10' : ''}`;
  const lua = join(dir, `${variant.name}-${kind}-${round}.lua`);
  const head = `wrk.headers["Authorization"] = "Bearer ${token}"\nwrk.headers["Content-Type"] = "application/json"\nlocal n = 0\n`;
  writeFileSync(
    lua,
    head +
      (kind === 'post'
        ? `request = function()\n  n = n + 1\n  return wrk.format("POST", "/plants", nil, '{"id":' .. n .. ',"name":"bench plant"}')\nend\n`
        : ''),
  );
  if (kind === 'get')
    for (let i = 0; i < 20; i++)
      await fetch(`http://127.0.0.1:${port}/plants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ id: 1_000_000 + i, name: `plant ${i}` }),
      });
  const warm = join(dir, `${variant.name}-${kind}-${round}-warm.lua`);
  writeFileSync(
    warm,
    head +
      (kind === 'post'
        ? `request = function()\n  n = n + 1\n  return wrk.format("POST", "/plants", nil, '{"id":' .. (5000000000 + n) .. ',"name":"warm"}')\nend\n`
        : ''),
  );
  // --timeout 10s: an answer slower than wrk's default 2 s is counted, not a socket error failing the run.
  await wrk(url, warm, 3, { timeout: '10s' });
  const cpu = cpuMsOf(child.pid!);
  const { requests } = await wrk(url, lua, 8, { timeout: '10s' });
  const us = ((cpuMsOf(child.pid!) - cpu) * 1000) / requests;
  child.kill('SIGTERM');
  await once(child, 'exit');
  return { us, rate: requests / 8 };
}

const results = new Map<string, { us: number[]; rate: number[] }>();
for (let round = 0; round < rounds; round++)
  for (const kind of kinds)
    for (const variant of variants) {
      const { us, rate } = await measure(variant, kind, round);
      const key = `${kind} ${variant.name}`;
      const row = results.get(key) ?? { us: [], rate: [] };
      row.us.push(us);
      row.rate.push(rate);
      results.set(key, row);
      console.error(`${key} round ${round + 1}: ${us.toFixed(1)} µs/request, ${Math.round(rate)} req/s`);
    }

console.log('| request | variant | µs/request (median; each run) | req/s (median) |');
console.log('| --- | --- | --- | --- |');
for (const [key, row] of results) {
  const [kind, variant] = key.split(' ');
  const request = kind === 'get' ? 'GET /plants?limit=10' : 'POST /plants';
  console.log(
    `| ${request} | ${variant} | ${median(row.us).toFixed(1)} (${row.us.map((u) => u.toFixed(1)).join(' ')}) | ${int(median(row.rate))} |`,
  );
}
collector.close();
rmSync(dir, { recursive: true, force: true });
