// What interface 1.2.0 costs a create (issue 23.7): POST /plants with one webhook, this build
// against the build of a baseline commit, in one run. Run by `npm run bench` after the event
// scenarios (BENCH_SKIP=events-cost leaves it out), or alone:
//
//   node --import tsx bench/cost-ab.ts                 # SQLite, then PostgreSQL
//   BENCH_SKIP=postgres node --import tsx bench/cost-ab.ts
//
// The baseline (BENCH_BASELINE, default the last commit of interface 1.1.0) is taken from git
// (`git archive`, so the checkout is not touched) and compiled with this checkout's TypeScript
// and dependencies into a temporary folder. Everything 1.2.0 adds to the path of a create and its
// delivery is in the difference: the attempt metrics, the attempt log, Retry-After, rotation's
// second signature. The two servers run side by side, each on a database of its own, each with
// one webhook to the same receiver (bench/receiver.mjs, answering 200 at once), pinned to core 0
// like every server under test; wrk -t1 -c50 on core 1 loads one of them at a time, in the order
// ABBA ABBA …, BENCH_COST_ROUNDS rounds each (default 6) of BENCH_DURATION seconds; after each
// round the harness waits until the receiver has every plant of it, so no round pays for the
// deliveries of another. The answer is the ratio of the medians (target ≥ 0.97).
import { execFileSync, execSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  RECEIVER,
  nextPrefix,
  postScript,
  resetReceiver,
  vacuumIfNoAutovacuum,
  waitForDeliveries,
  wrk,
} from './events.js';
import { type Server, fmt, int, loadAverage, median, onBenchPostgres, start } from './harness.js';

const THIS = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The last commit of interface 1.1.0 (BENCHMARKS.md's issue 14 numbers were measured on it). */
const BASELINE = process.env.BENCH_BASELINE ?? '22f97a4';
const ROUNDS = Number(process.env.BENCH_COST_ROUNDS ?? 6);
const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const WARM_UP = 3;
/** The longest wait for a round's deliveries; PostgreSQL delivers about 1,000–2,000 a second here. */
const DRAIN_MS = Number(process.env.BENCH_COST_DRAIN_MS ?? 300_000);
const SKIP = new Set((process.env.BENCH_SKIP ?? '').split(',').filter(Boolean));
const SERVER_ENV = { PORT: '0', RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1' };

interface Build {
  readonly name: string;
  /** bin/plant-store.js of this build. */
  readonly bin: string;
}

/** The baseline's sources from git, compiled with this checkout's dependencies; answers its folder. */
function buildBaseline(rev: string): { build: Build; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-baseline-'));
  execSync(`git -C ${JSON.stringify(ROOT)} archive ${rev} | tar -x -C ${JSON.stringify(dir)}`, { stdio: 'inherit' });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
    cwd: dir,
    stdio: 'inherit',
  });
  const label = execFileSync('git', ['-C', ROOT, 'log', '-1', '--format=%h', rev], { encoding: 'utf8' }).trim();
  return { build: { name: `baseline ${label}`, bin: join(dir, 'bin/plant-store.js') }, dir };
}

const cli = (build: Build, args: string[], env: NodeJS.ProcessEnv): string =>
  execFileSync(process.execPath, [build.bin, ...args], {
    env: { ...process.env, ...SERVER_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
  });

interface Side {
  readonly build: Build;
  readonly env: NodeJS.ProcessEnv;
  readonly server: Server;
  readonly token: string;
  readonly rps: number[];
}

/** POST with one webhook, baseline against this build, on one engine: a table row and notes. */
export async function costScenario(
  engine: string,
  envs: readonly [NodeJS.ProcessEnv, NodeJS.ProcessEnv],
): Promise<{ rows: string[]; notes: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-cost-'));
  const notes: string[] = [];
  const note = (text: string): void => {
    notes.push(`${engine}: ${text}`);
    console.error(`  ${engine}: ${text}`);
  };
  const { build: baseline, dir: baselineDir } = buildBaseline(BASELINE);
  const current: Build = { name: 'this build', bin: join(ROOT, 'bin/plant-store.js') };
  const servers: Server[] = [];
  try {
    const receiver = await start(dir, [RECEIVER], { PORT: '0' }, '1', /listening (\d+)/);
    servers.push(receiver);
    const sides: Side[] = [];
    for (const [k, build] of [baseline, current].entries()) {
      const env = envs[k]!;
      cli(build, ['migrate'], env);
      const token = (
        JSON.parse(
          cli(build, ['token', 'create', '--subject', 'bench', '--scopes', 'plants:read,plants:write', '--json'], env),
        ) as { token: string }
      ).token;
      cli(build, ['webhooks', 'add', '--subject', 'bench', '--url', `${receiver.url}/hook`, '--json'], env);
      const server = await start(
        dir,
        [build.bin, 'serve'],
        { ...SERVER_ENV, ...env },
        '0',
        /Server listening at http:\/\/127\.0\.0\.1:(\d+)/,
      );
      servers.push(server);
      sides.push({ build, env, server, token, rps: [] });
    }
    /** One run against one side; its deliveries all arrive before the next run starts. */
    const run = async (side: Side, seconds: number): Promise<number> => {
      await vacuumIfNoAutovacuum(side.env);
      await resetReceiver(receiver);
      const started = Date.now();
      const result = await wrk(side.server.url, postScript(dir, side.token, nextPrefix()), seconds);
      const ended = Date.now();
      const got = await waitForDeliveries(receiver, result.requests, DRAIN_MS);
      // How fast each build delivers once the load stops: the attempt log is written per delivery.
      if (seconds === DURATION)
        note(
          `${side.build.name}: ${int(result.rps)} req/s; ${got.unique} of ${result.requests} delivered ` +
            `${((got.last - ended) / 1000).toFixed(1)} s after the load (${int(got.unique / ((got.last - started) / 1000))}/s from its start)`,
        );
      if (got.unique < result.requests)
        note(`${side.build.name}: ${result.requests - got.unique} deliveries not in after ${DRAIN_MS / 1000} s`);
      return result.rps;
    };
    for (const side of sides) await run(side, WARM_UP);
    const [a, b] = sides as [Side, Side];
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? [a, b] : [b, a];
      for (const side of order) side.rps.push(await run(side, DURATION));
      note(
        `round ${round + 1}: baseline ${int(a.rps.at(-1)!)} req/s, this build ${int(b.rps.at(-1)!)} req/s (${fmt(b.rps.at(-1)! / a.rps.at(-1)!)}); load average ${loadAverage()}`,
      );
    }
    const ratio = median(b.rps) / median(a.rps);
    const perRound = a.rps.map((x, i) => fmt(b.rps[i]! / x)).join(', ');
    note(`baseline: ${baseline.name}; ratios by round ${perRound}`);
    const rows = [
      `| ${engine} | POST /plants, 1 webhook: this build against the 1.1.0 build (target ratio ≥ 0.97) | ${int(median(b.rps))} | — | — | ${int(median(a.rps))} | — | — | ${fmt(ratio)} |`,
    ];
    console.error(rows[0]);
    return { rows, notes };
  } finally {
    await Promise.allSettled(servers.map((s) => s.stop()));
    rmSync(dir, { recursive: true, force: true });
    rmSync(baselineDir, { recursive: true, force: true });
  }
}

/**
 * Two empty databases of the engine `env` names, one for each build (each migrates its own): two
 * files beside an SQLite one, two databases on the PostgreSQL server.
 */
export async function costDatabases(env: NodeJS.ProcessEnv): Promise<[NodeJS.ProcessEnv, NodeJS.ProcessEnv]> {
  const url = env.DATABASE_URL!;
  const names = ['plant_store_cost_a', 'plant_store_cost_b'] as const;
  if (url.startsWith('sqlite:')) {
    const folder = mkdtempSync(join(tmpdir(), 'plant-store-bench-cost-db-'));
    return [{ DATABASE_URL: `sqlite:${join(folder, 'a.db')}` }, { DATABASE_URL: `sqlite:${join(folder, 'b.db')}` }];
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    for (const name of names) {
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.query(`CREATE DATABASE ${name}`);
    }
  } finally {
    await admin.end();
  }
  const at = (name: string): NodeJS.ProcessEnv => {
    const u = new URL(url);
    u.pathname = `/${name}`;
    return { DATABASE_URL: u.href };
  };
  return [at(names[0]), at(names[1])];
}

async function main(): Promise<void> {
  const started = new Date();
  const results: Array<{ rows: string[]; notes: string[] }> = [];
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-bench-cost-'));
  try {
    if (!SKIP.has('sqlite'))
      results.push(await costScenario('SQLite', await costDatabases({ DATABASE_URL: `sqlite:${join(dir, 'x.db')}` })));
    if (!SKIP.has('postgres'))
      results.push(
        await onBenchPostgres(async (url) => costScenario('PostgreSQL', await costDatabases({ DATABASE_URL: url }))),
      );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `\n${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${started.toISOString()}`,
  );
  console.log(
    `both servers pinned to core 0; wrk -t1 -c50 -d${DURATION}s on core 1; ${ROUNDS} rounds each, ABBA order, medians\n`,
  );
  console.log('| engine | scenario | this build req/s | | | baseline req/s | | | ratio |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of results) for (const line of r.rows) console.log(line);
  console.log('');
  for (const r of results) for (const line of r.notes) console.log(`- ${line}`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === THIS) await main();
