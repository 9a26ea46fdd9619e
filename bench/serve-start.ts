import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rss } from './kit/process.js';
import { median } from './kit/stats.js';

/**
 * What `serve` costs to start, install by install: the time from the process's spawn to its
 * `plant-store serving` line, and its resident memory (VmRSS) then, on a SQLite file of its own.
 * The installs run in turn, round after round, so that a busy host weighs on each alike; the
 * medians are printed, with the spread. Linux only (/proc).
 *
 * Usage: node --import tsx bench/serve-start.ts [--rounds 30] [--env NAME=value …] [<install root> …]
 * (default: this checkout). The tracing packages' weight (docs/architecture.md, "Dependencies"):
 * two installs, `npm prune --omit=dev` and `npm prune --omit=dev --omit=optional`, each with `dist/`;
 * `--env OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9` for tracing on.
 */

const args = process.argv.slice(2);
let rounds = 30;
const env: Record<string, string> = {};
const roots: string[] = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--rounds') rounds = Number(args[++i]);
  else if (args[i] === '--env') {
    const [name, ...value] = args[++i]!.split('=');
    env[name!] = value.join('=');
  } else roots.push(resolve(args[i]!));
}
if (roots.length === 0) roots.push(fileURLToPath(new URL('..', import.meta.url)));

const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-start-'));
let runs = 0;

function start(root: string): Promise<{ ms: number; rssMiB: number }> {
  return new Promise((done, fail) => {
    const started = process.hrtime.bigint();
    const child = spawn(process.execPath, [join(root, 'bin/plant-store.js'), 'serve'], {
      env: { PATH: process.env.PATH, PORT: '0', DATABASE_URL: `sqlite:${join(dir, `${runs++}.db`)}`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let ready = false;
    child.stderr.on('data', (chunk: Buffer) => void (out += chunk.toString()));
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (ready || !out.includes('plant-store serving')) return;
      ready = true;
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const rssMiB = rss(child.pid!);
      child.once('exit', () => done({ ms, rssMiB }));
      child.kill('SIGTERM');
    });
    child.once('exit', (code) => {
      if (!ready) fail(new Error(`${root}: serve exited with ${code} before serving:\n${out}`));
    });
  });
}

const spread = (values: number[], digits: number): string =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)} to ${Math.max(...values).toFixed(digits)})`;

try {
  const results = roots.map(() => ({ ms: [] as number[], rss: [] as number[] }));
  for (let round = 0; round < rounds; round++)
    for (const [i, root] of roots.entries()) {
      const { ms, rssMiB } = await start(root);
      results[i]!.ms.push(ms);
      results[i]!.rss.push(rssMiB);
    }
  for (const [i, root] of roots.entries())
    console.log(
      `${root}: serving after ${spread(results[i]!.ms, 0)} ms, RSS ${spread(results[i]!.rss, 1)} MiB (${rounds} starts)`,
    );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
