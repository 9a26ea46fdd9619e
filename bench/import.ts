// npm run bench:import [-- <plants>] — times `plant-store import` of generated plants into a fresh
// SQLite file (and into PostgreSQL when BENCH_DATABASE_URL is set), then a second, idempotent run.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, cli } from './kit/server.js';
import { int } from './kit/stats.js';

const count = Number(process.argv[2] ?? 1_000_000);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-import-'));

try {
  const file = join(dir, 'plants.ndjson');
  const rows: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = BigInt(i) * 9_223_372_036_854n - 4_611_686_018_427_387_904n;
    const tag = i % 3 ? `,"tag":"tag${i % 50}"` : '';
    rows.push(`{"id":${id},"owner":"user${i % 1000}","name":"plant number ${i}"${tag}}`);
  }
  writeFileSync(file, rows.join('\n') + '\n');

  const time = (label: string, env: NodeJS.ProcessEnv): void => {
    const started = process.hrtime.bigint();
    const run = spawnSync(process.execPath, [BIN, 'import', file], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (run.status !== 0) throw new Error(`${label} failed: ${run.stderr}`);
    const summary = run.stderr.trim().split('\n').at(-1);
    console.log(
      `| ${label} | ${count.toLocaleString('en-US')} | ${seconds.toFixed(1)} s | ${int(count / seconds)}/s | ${summary} |`,
    );
  };

  console.log(
    `node ${process.version}, ${cpus().length} × ${cpus()[0]?.model}, ${new Date().toISOString().slice(0, 10)}`,
  );
  console.log('| run | plants | wall time | rate | summary |\n|---|---|---|---|---|');
  const sqlite = { DATABASE_URL: `sqlite:${join(dir, 'bench.db')}` };
  time('SQLite, fresh file', sqlite);
  time('SQLite, same file again (idempotent)', sqlite);
  if (process.env.BENCH_DATABASE_URL) {
    const url = process.env.BENCH_DATABASE_URL;
    cli(['migrate'], { DATABASE_URL: url });
    time('PostgreSQL', { DATABASE_URL: url });
    time('PostgreSQL again (idempotent)', { DATABASE_URL: url });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
