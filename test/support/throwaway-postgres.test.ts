import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { freePort } from './postgres.js';

// The PostgreSQL the tests use, settled once by test/run.ts, and said clearly when it cannot be had.

const run = promisify(execFile);
const isRoot = process.getuid?.() === 0;

/** `test/run.ts --check` in a child with the given environment changes (undefined removes a variable). */
async function check(
  env: Record<string, string | undefined>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env };
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined) delete childEnv[name];
    else childEnv[name] = value;
  }
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'test/run.ts', '--check'], {
      env: childEnv,
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}

/** A fresh temporary folder (mode 0700, as mkdtemp makes it) to be the child's TMPDIR. */
function privateTmp(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-tmp-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const ours = (dir: string): string[] => readdirSync(dir).filter((name) => name.startsWith('plant-store-pg'));

test('without TEST_DATABASE_URL a throwaway server starts, answers and stops, leaving nothing behind (as root: run by the postgres user from a staged copy)', async (t) => {
  // A fresh folder that other users may enter, as /tmp is: the staged binaries and the data go there.
  const tmp = privateTmp(t);
  await run('chmod', ['0755', tmp]);
  const result = await check({ TEST_DATABASE_URL: undefined, TMPDIR: tmp });
  assert.equal(result.code, 0, result.stderr);
  assert.match(result.stdout, /a throwaway server at postgres:\/\/.+, started and stopped/);
  assert.deepEqual(ours(tmp), [], 'the staged binaries and the data folder are removed');
});

test(
  'as root with a TMPDIR the postgres user cannot enter: one clear message, exit 1, nothing left behind',
  { skip: !isRoot && 'only root runs the server as another user' },
  async (t) => {
    const tmp = privateTmp(t);
    const result = await check({ TEST_DATABASE_URL: undefined, TMPDIR: tmp });
    assert.equal(result.code, 1);
    assert.equal(result.stdout, '');
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, /^npm test: no PostgreSQL for the tests: TEST_DATABASE_URL is not set/);
    assert.match(lines[0]!, /the postgres user cannot run .*initdb.*EACCES/);
    assert.match(lines[0]!, /set TEST_DATABASE_URL/);
    assert.deepEqual(ours(tmp), [], 'the staged copy is removed after the failure');
  },
);

test('a TEST_DATABASE_URL whose server does not answer stops the run with one clear message, exit 1', async () => {
  const port = await freePort(); // nothing listens there
  const result = await check({ TEST_DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/none` });
  assert.equal(result.code, 1);
  const lines = result.stderr.trim().split('\n');
  assert.equal(lines.length, 1, result.stderr);
  assert.match(lines[0]!, /^npm test: TEST_DATABASE_URL is set but its server cannot be used \(connect ECONNREFUSED/);
  assert.match(lines[0]!, /unset it to let the tests start a throwaway server/);
});
