import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type ServerProcess, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/postgres.js';

// The second walkthrough, points 1, 5 and 9, on one `serve --workers 2` in a process group of its
// own: the start-up lines say the port bound with PORT=0; a SIGHUP to the whole group is a reload
// by the primary that no worker warns about; and a settings file that changes PORT leaves the port
// as started (a reload that moved it took the service off the port nginx knows), says so once, and
// still applies what a reload can change.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-reload-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const settings = join(dir, 'settings.env');
let server: ServerProcess;

before(async () => {
  writeFileSync(settings, 'LOG_LEVEL=info\n');
  server = await startServer(
    { DATABASE_URL: `sqlite:${join(dir, 'store.db')}`, RATE_LIMIT: 'off', PORT: '0' },
    undefined,
    ['--workers', '2', '--settings-file', settings],
    { detached: true },
  );
});
after(() => server.stop());

interface Line {
  level: number;
  msg: string;
  pid: number;
  port?: number;
  settings?: string[];
}

const lines = (msg: RegExp): Line[] =>
  server
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Line)
    .filter((line) => msg.test(line.msg));

test('PORT=0: the primary’s `started workers` line and each worker’s `plant-store serving` say the port bound', async () => {
  const port = Number(new URL(server.url).port);
  const started = await eventually(
    async () => lines(/^started workers$/)[0],
    () => `the primary's start-up line in:\n${server.logs()}`,
  );
  assert.equal(started.port, port);
  const serving = await eventually(
    async () => (lines(/^plant-store serving$/).length === 2 ? lines(/^plant-store serving$/) : undefined),
    () => `both workers' start-up lines in:\n${server.logs()}`,
  );
  assert.deepEqual(
    serving.map((line) => line.port),
    [port, port],
  );
});

test('SIGHUP to the process group: the primary reloads, no worker warns; a changed PORT stays as started, with one warning, and CORS_ORIGINS applies', async () => {
  const other = await freePort();
  writeFileSync(settings, `LOG_LEVEL=info\nPORT=${other}\nCORS_ORIGINS=https://app.example\n`);
  process.kill(-server.child.pid!, 'SIGHUP'); // the primary and both workers get it
  await eventually(
    async () => (lines(/^reload done$/).length === 1 ? true : undefined),
    () => `"reload done" in:\n${server.logs()}`,
    30_000,
  );
  assert.equal(lines(/^reload: the old worker stopped$/).length, 2);
  assert.deepEqual(lines(/single process does not reload/), [], 'a worker does not say it cannot reload');

  const kept = lines(/^reload: .* changed in the settings file/);
  assert.equal(kept.length, 1, server.logs());
  assert.equal(kept[0]!.level, 40);
  assert.deepEqual(kept[0]!.settings, ['PORT']);
  assert.match(kept[0]!.msg, /^reload: PORT changed in the settings file; .*a restart applies it$/);

  assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'the started port still serves');
  await assert.rejects(fetch(`http://127.0.0.1:${other}/healthz`), 'the file’s port is not listened on');
  const preflight = await fetch(`${server.url}/plants`, {
    method: 'OPTIONS',
    headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
  });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), 'https://app.example');
  assert.equal(lines(/^started workers$/).length, 1, 'the start-up line is not repeated by a reload');
});
