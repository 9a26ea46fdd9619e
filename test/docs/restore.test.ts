import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type ServerProcess, callServer, runCli, startServer } from '../process.js';

// "Restore a SQLite backup" (docs/operations.md), its lines after `<!-- restore -->` run as
// printed by bash (`set -euo pipefail`) in the server's folder: after a clean stop, which leaves
// no -wal file (the printed `mv data/plant-store.db-wal …` failed there), and
// after a crash, which leaves one (moved aside, never replayed into the restored file). The
// restarted server has the backup's plants and not the later ones.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
const exec = promisify(execFile);

const dir = mkdtempSync(join(tmpdir(), 'plant-store-restore-'));
const servers: ServerProcess[] = [];
after(async () => {
  for (const server of servers) await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The printed lines: the ```sh block after `<!-- restore -->`, out of its list item's indentation. */
function restoreLines(): string {
  const m = /^( *)<!-- restore -->\n+ *```sh\n([\s\S]*?)\n *```/m.exec(DOC);
  assert.ok(m, 'docs/operations.md marks the restore lines: <!-- restore --> before a ```sh block');
  return m[2]!
    .split('\n')
    .map((line) => line.slice(m[1]!.length))
    .join('\n');
}

async function restoreIn(folder: string, crash: boolean): Promise<void> {
  mkdirSync(join(folder, 'data'), { recursive: true });
  const env = { DATABASE_URL: 'sqlite:data/plant-store.db', RATE_LIMIT: 'off' };
  const minted = await runCli(
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'],
    env,
    folder,
  );
  assert.equal(minted.code, 0, minted.stderr);
  const token = minted.stdout.trim();
  const live = await startServer(env, folder);
  servers.push(live);
  const create = async (server: ServerProcess, name: string): Promise<void> => {
    const answer = await callServer(server, token, 'POST', '/plants', `{"id": 9007199254740993, "name": "${name}"}`);
    assert.equal(answer.status, 200, answer.text);
  };
  await create(live, 'Monstera');
  const older = await runCli(['backup', 'backups/plant-store-2026-04-30.db'], env, folder);
  assert.equal(older.code, 0, older.stderr);
  await callServer(live, token, 'DELETE', '/plants/9007199254740993');
  await create(live, 'Ficus');
  const backup = await runCli(['backup', 'backups/plant-store-2026-05-01.db'], env, folder);
  assert.equal(backup.code, 0, backup.stderr);
  await callServer(live, token, 'DELETE', '/plants/9007199254740993');
  await create(live, 'after the backup');

  if (crash) {
    live.child.kill('SIGKILL');
    await live.stop();
    assert.ok(existsSync(join(folder, 'data/plant-store.db-wal')), 'a crash leaves the -wal file');
  } else {
    assert.equal(await live.stop(), 0);
    assert.ok(!existsSync(join(folder, 'data/plant-store.db-wal')), 'a clean stop leaves no -wal file');
  }

  const { stdout, stderr } = await exec('bash', ['-c', `set -euo pipefail\n${restoreLines()}`], { cwd: folder });
  assert.equal(`${stdout}${stderr}`, '');
  assert.ok(existsSync(join(folder, 'data/plant-store.db.old')));
  assert.equal(existsSync(join(folder, 'data/plant-store.db-wal.old')), crash);
  assert.ok(!existsSync(join(folder, 'data/plant-store.db-wal')), 'no -wal beside the restored file');

  const restored = await startServer(env, folder);
  servers.push(restored);
  const list = await callServer(restored, token, 'GET', '/plants');
  assert.equal(list.status, 200, list.text);
  assert.deepEqual(
    (JSON.parse(list.text) as Array<{ name: string }>).map((plant) => plant.name),
    ['Ficus'],
    'the newest backup, as it was',
  );
  await restored.stop();
}

test(
  'the restore lines of docs/operations.md, as printed, after a clean stop (no -wal file)',
  { timeout: 90_000 },
  () => restoreIn(join(dir, 'clean'), false),
);

test(
  'the restore lines of docs/operations.md, as printed, after a crash (a -wal file moved aside)',
  { timeout: 90_000 },
  () => restoreIn(join(dir, 'crash'), true),
);
