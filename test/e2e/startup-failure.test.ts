import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli, runCliWithin, startServer } from '../process.js';
import { postgresUrl, stopSharedPostgres } from '../support/postgres.js';

// A start that fails says so in one JSON line on stdout, in the log's shape,
// naming the component that failed; the process exits non-zero and says it on stderr too.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-start-'));
after(() => rmSync(dir, { recursive: true, force: true }));
after(stopSharedPostgres);

interface Line {
  level: number;
  msg: string;
  component?: string;
  reason?: string;
  code?: string;
  pid?: number;
}

/** Every stdout line parsed as JSON (a line that is not JSON fails the test), and the fatal one. */
function fatal(stdout: string): Line {
  const lines = stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Line);
  const fatal = lines.filter((line) => line.level === 60);
  assert.equal(fatal.length, 1, `one fatal line: ${stdout}`);
  return fatal[0]!;
}

test('a port already taken: component "http", the reason and its code', async (t) => {
  const database = `sqlite:${join(dir, 'port.db')}`;
  const first = await startServer({ DATABASE_URL: database });
  t.after(() => first.stop());
  const port = new URL(first.url).port;
  const second = await runCli(['serve'], { DATABASE_URL: database, PORT: port, LOG_LEVEL: 'info' });
  assert.equal(second.code, 1);
  const line = fatal(second.stdout);
  assert.equal(line.component, 'http');
  assert.equal(line.code, 'EADDRINUSE');
  assert.match(line.reason!, new RegExp(`EADDRINUSE.*127\\.0\\.0\\.1:${port}`));
  assert.equal(line.msg, 'plant-store could not start: http failed');
  assert.equal(typeof line.pid, 'number');
  assert.match(second.stderr, /^plant-store: listen EADDRINUSE/m);
});

for (const workers of [[], ['--workers', '2']]) {
  test(`a database that cannot be reached: component "database" (serve ${workers.join(' ')})`, async () => {
    // Port 1 on the loopback: nothing listens there, so the connection is refused at once.
    const result = await runCli(['serve', ...workers], {
      DATABASE_URL: 'postgres://plant:secret-password@127.0.0.1:1/plants',
      PORT: '0',
      LOG_LEVEL: 'info',
    });
    assert.equal(result.code, 1);
    const line = fatal(result.stdout);
    assert.equal(line.component, 'database');
    assert.match(line.reason!, /ECONNREFUSED 127\.0\.0\.1:1/);
    assert.equal(line.code, 'ECONNREFUSED', 'the code under the store’s own error');
    assert.ok(!result.stdout.includes('secret-password') && !result.stderr.includes('secret-password'));
  });
}

test('a setting that does not parse: component "settings", exit code 2', async () => {
  const result = await runCli(['serve'], { DATABASE_URL: `sqlite:${join(dir, 'x.db')}`, PORT: 'eighty' });
  assert.equal(result.code, 2);
  const line = fatal(result.stdout);
  assert.equal(line.component, 'settings');
  assert.match(line.reason!, /PORT/);
  assert.match(result.stderr, /^plant-store: .*PORT/m);
});

test('serve --workers 2 on sqlite::memory: component "settings", exit code 2', async () => {
  const result = await runCli(['serve', '--workers', '2'], { DATABASE_URL: 'sqlite::memory:', PORT: '0' });
  assert.equal(result.code, 2);
  const line = fatal(result.stdout);
  assert.equal(line.component, 'settings');
  assert.match(line.reason!, /sqlite::memory: cannot be shared by several workers/);
});

test('a settings file line that does not parse is named by file and line, never repeated (it may hold a secret)', async () => {
  const file = join(dir, 'settings.env');
  writeFileSync(file, 'PORT=0\nSECRETS_KEY: c2VjcmV0LWtleS1tYXRlcmlhbA==\n');
  const result = await runCli(['serve', '--settings-file', file], { DATABASE_URL: `sqlite:${join(dir, 'y.db')}` });
  assert.equal(result.code, 2);
  const line = fatal(result.stdout);
  assert.equal(line.component, 'settings');
  assert.match(line.reason!, new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: expected NAME=value`));
  assert.ok(!(result.stdout + result.stderr).includes('c2VjcmV0'), 'the line’s value is in neither stream');
});

test('a PUBLIC_URL with credentials is refused without repeating them', async () => {
  const result = await runCli(['serve'], {
    DATABASE_URL: `sqlite:${join(dir, 'z.db')}`,
    PORT: '0',
    PUBLIC_URL: 'https://admin:s3cret@plants.example.com',
  });
  assert.equal(result.code, 2);
  assert.equal(fatal(result.stdout).component, 'settings');
  assert.ok(!(result.stdout + result.stderr).includes('s3cret'));
});

// The second walkthrough, point 3: a SQLite path that cannot be made or opened span in a mkdir loop
// (`/proc/x`: at 80 % of a core, deaf to SIGTERM) or failed without saying what to change. Each
// command is killed by its pid if it is still running after 30 s: a bound on the test, not a speed.
const file = join(dir, 'a-file');
writeFileSync(file, 'not a folder');
const locked = join(dir, 'locked');
mkdirSync(locked, { mode: 0o500 });
const asRoot = process.getuid?.() === 0;
for (const [what, path, workers] of [
  ['a folder under /proc, which takes none', '/proc/x/plants.db', []],
  ['a folder under a regular file', join(file, 'data', 'plants.db'), ['--workers', '2']],
  ['a file that is a folder', dir, []],
  ['a folder without write permission', join(locked, 'data', 'plants.db'), []],
] as const) {
  test(
    `a SQLite path that cannot be made or opened (${what}): component "database", one line on stderr, exit 1`,
    { skip: path.startsWith(locked) && asRoot ? 'as root every folder is writable' : false },
    async () => {
      const result = await runCliWithin(30_000, ['serve', ...workers], {
        DATABASE_URL: `sqlite:${path}`,
        PORT: '0',
        LOG_LEVEL: 'info',
      });
      assert.equal(result.code, 1, result.stderr);
      const line = fatal(result.stdout);
      assert.equal(line.component, 'database');
      assert.ok(line.reason!.startsWith(`cannot open the SQLite database ${path}: `), line.reason);
      assert.match(
        line.reason!,
        /DATABASE_URL must name a file that this process can write, in a folder it can create and write$/,
      );
      assert.equal(typeof line.code, 'string', 'the system’s code (ENOENT, ENOTDIR, SQLITE_CANTOPEN…)');
      assert.deepEqual(result.stderr.trimEnd().split('\n'), [`plant-store: ${line.reason}`]);
    },
  );
}

// The second walkthrough, point 4: a PostgreSQL database that does not exist says how to create it.
test('a PostgreSQL database that does not exist: component "database", and the createdb command that makes it', async () => {
  const url = new URL(await postgresUrl());
  const name = `plant_store_missing_${randomBytes(4).toString('hex')}`;
  url.pathname = `/${name}`;
  const result = await runCli(['serve'], { DATABASE_URL: url.toString(), PORT: '0', LOG_LEVEL: 'info' });
  assert.equal(result.code, 1, result.stderr);
  const line = fatal(result.stdout);
  assert.equal(line.component, 'database');
  assert.equal(line.code, '3D000');
  const createdb = `createdb -h ${url.hostname} -p ${url.port || '5432'} -U ${url.username} ${name}`;
  assert.equal(line.reason, `database "${name}" does not exist: create it with ${createdb}, then run this again`);
  assert.ok(result.stderr.includes(`plant-store: ${line.reason}\n`), result.stderr);
  // The throwaway server's password is its user name, so the check is for a URL's user:password@.
  const shown = result.stdout + result.stderr;
  if (url.password !== '') assert.ok(!shown.includes(`:${url.password}@`), 'no password shown');
  assert.doesNotMatch(shown, /\/\/[^/\s@]*:[^/\s@]*@/, 'no URL with a password');
});
