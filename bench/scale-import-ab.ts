// A/B of `plant-store import` on SQLite at growing sizes (issue 36, the plants axis): the same
// generated file (as bench/scale-plants.ts makes it) imported into a fresh file by two builds in
// turn, A (BENCH_SCALE_CHECKOUT, a built checkout) and B (this one), `--rounds` times each,
// alternating. Each import: wall time, the process's CPU and its peak RSS (/usr/bin/time).
//
//   BENCH_SCALE_CHECKOUT=<dir> node --import tsx bench/scale-import-ab.ts [--rounds 2] [millions…]
//
// Files under /var/tmp, deleted after each size (10 million: 0.9 GB of NDJSON, 2.7 GB of database).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadAverage } from './harness.js';
import { writePlants } from './scale-plants.js';

// The import's own reads and writes (read/pread and write calls, page cache hits included), at its exit.
const IO_AT_EXIT = `--import=data:text/javascript,${encodeURIComponent(
  "import { readFileSync } from 'node:fs'; process.on('exit', () => process.stderr.write(`io ${readFileSync('/proc/self/io', 'utf8').replace(/\\n/g, ' ')}\\n`));",
)}`;
const ioCount = (stderr: string, name: string): number => Number(new RegExp(`${name}: (\\d+)`).exec(stderr)?.[1]);

const { values, positionals } = parseArgs({
  options: { rounds: { type: 'string', default: '2' } },
  allowPositionals: true,
});
const checkout = process.env.BENCH_SCALE_CHECKOUT;
if (!checkout) throw new Error('BENCH_SCALE_CHECKOUT=<dir>: the built checkout to compare with (A)');
const builds = {
  A: join(checkout, 'bin/plant-store.js'),
  B: fileURLToPath(new URL('../bin/plant-store.js', import.meta.url)),
};

for (const millions of positionals.length > 0 ? positionals.map(Number) : [1, 10]) {
  const n = Math.round(millions * 1e6);
  const dir = mkdtempSync('/var/tmp/plant-store-import-ab-');
  try {
    const file = join(dir, 'plants.ndjson');
    writePlants(file, n);
    for (let round = 1; round <= Number(values.rounds); round++) {
      for (const [label, bin] of Object.entries(builds)) {
        const load = loadAverage();
        const db = join(dir, `${label}.db`);
        const run = spawnSync(
          '/usr/bin/time',
          ['-f', '%e %U %S %M', process.execPath, IO_AT_EXIT, bin, 'import', file],
          {
            env: { ...process.env, DATABASE_URL: `sqlite:${db}` },
            encoding: 'utf8',
          },
        );
        if (run.status !== 0) throw new Error(`${label} failed: ${run.stderr}`);
        const [wall = 0, user = 0, sys = 0, maxKiB = 0] = run.stderr.trim().split('\n').at(-1)!.split(' ').map(Number);
        console.log(
          `${n.toLocaleString('en-US')} plants, ${label} (round ${round}): ${wall.toFixed(1)} s, ` +
            `${Math.round(n / wall).toLocaleString('en-US')} plants/s, CPU ${(user + sys).toFixed(1)} s ` +
            `(${(((user + sys) * 1e6) / n).toFixed(1)} µs a plant), ${(ioCount(run.stderr, 'syscr') / n).toFixed(2)} reads ` +
            `and ${(ioCount(run.stderr, 'wchar') / n).toFixed(0)} bytes written a plant, peak RSS ${Math.round(maxKiB / 1024)} MiB, ` +
            `load average before ${load}`,
        );
        rmSync(db, { force: true });
        rmSync(`${db}-wal`, { force: true });
        rmSync(`${db}-shm`, { force: true });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
