import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { BackupRefusedError, backupSqlite } from '../../src/store/sqlite/snapshot.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import { runCli, mintCliToken, runCliWithin, startServer } from '../process.js';
import { WriteLoad, allEvents, allPlants, instantsOf, missedWrites, seedId, seedPlants } from './snapshot-support.js';

// Operations issue, 5: `plant-store backup <file>` copies a SQLite database while the server
// writes it, and the copy is the database at one instant.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-backup-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const freshDir = (): string => mkdtempSync(join(dir, `${n++}-`));

const integrity = (path: string): unknown => {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return db.pragma('integrity_check', { simple: true });
  } finally {
    db.close();
  }
};

async function seed(path: string, count: number): Promise<void> {
  const store = openSqlite(path);
  try {
    await store.migrate();
    await store.insertBatch(seedPlants(count));
  } finally {
    await store.close();
  }
}

test(
  'backup under a create/delete load: the restored copy passes integrity_check, holds every write acknowledged before it started, and is the store at one instant',
  { timeout: 120_000 },
  async (t) => {
    const at = freshDir();
    const path = join(at, 'store.db');
    const env = { DATABASE_URL: `sqlite:${path}`, RATE_LIMIT: 'off' };
    await seed(path, 20_000);
    const token = await mintCliToken(env, 'ops', 'plants:admin');
    const server = await startServer(env);
    t.after(() => server.stop());
    const load = new WriteLoad(
      server.url,
      token,
      Array.from({ length: 20_000 }, (_, i) => seedId(i)),
    );
    t.after(() => load.stop());

    await load.acknowledged(200);
    const before = load.acks.slice();
    const file = join(at, 'backups', 'store-copy.db');
    const r = await runCli(['backup', file], env);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    const lines = r.stderr.trimEnd().split('\n');
    assert.equal(lines[0], `plant-store: database sqlite:${path}`);
    assert.match(
      lines.at(-1)!,
      new RegExp(`^Backed up sqlite:${path} to ${file}: \\d+\\.\\d (KiB|MiB) \\([\\d,]+ pages\\) in \\d+\\.\\d s\\.$`),
    );
    // Writes go on after the backup, so the live store moves past the copy.
    await load.acknowledged(load.acks.length + 100);
    await load.stop();
    assert.deepEqual(load.failures, []);
    await server.stop();

    // Restore as docs/operations.md says: the file copied into place, then opened.
    const restored = join(at, 'restored.db');
    copyFileSync(file, restored);
    assert.equal(integrity(restored), 'ok');
    const copy = openSqlite(restored);
    const live = openSqlite(path);
    t.after(() => Promise.all([copy.close(), live.close()]));
    const plants = await allPlants(copy);
    const events = await allEvents(copy);
    assert.deepEqual(missedWrites(before, plants), [], 'every write acknowledged before the backup is in it');
    // The plants are exactly the log's changes replayed to its end: the two tables of one instant.
    assert.deepEqual(instantsOf(events, plants).at(-1), events.length - 1);
    const liveEvents = await allEvents(live);
    assert.ok(events.length < liveEvents.length, 'writes after the backup are not in it');
    assert.deepEqual(events, liveEvents.slice(0, events.length), 'the copy holds the live log up to one point');

    // The restored database serves, and knows the tokens it had.
    const again = await startServer({ ...env, DATABASE_URL: `sqlite:${restored}` });
    t.after(() => again.stop());
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const created = await fetch(`${again.url}/plants`, { method: 'POST', headers, body: '{"id":-1,"name":"after"}' });
    assert.equal(created.status, 200);
    const first = await fetch(`${again.url}/plants?limit=1`, { headers });
    assert.deepEqual(await first.json(), [{ name: 'after' }]);
  },
);

test('a backup copies the snapshot it started from: a commit by another connection during the copy is neither in it nor restarts it', async (t) => {
  const at = freshDir();
  const path = join(at, 'store.db');
  await seed(path, 2000);
  const writer = new Database(path);
  t.after(() => writer.close());
  const copied: Array<[number, number]> = [];
  const result = await backupSqlite(path, join(at, 'copy.db'), {
    pagesPerStep: 5,
    onProgress: (done, total) => {
      copied.push([done, total]);
      if (copied.length !== 2) return;
      // Between two steps of the copy, as the server would: a create and a delete, committed.
      writer.exec(
        `INSERT INTO plants (id, owner, name) VALUES (-7, 'late', 'late'); DELETE FROM plants WHERE id = ${seedId(1999)}`,
      );
    },
  });
  assert.ok(copied.length > 10, 'the copy took several steps');
  assert.ok(
    copied.every(([done], i) => i === 0 || done >= copied[i - 1]![0]),
    'pages copied only grow: the copy never restarted',
  );
  assert.deepEqual(copied.at(-1), [result.pages, result.pages]);
  assert.equal(integrity(join(at, 'copy.db')), 'ok');
  const copy = new Database(join(at, 'copy.db'), { readonly: true });
  t.after(() => copy.close());
  const ids = (sql: string): unknown => copy.prepare(sql).pluck().all();
  assert.deepEqual(ids('SELECT count(*) FROM plants'), [2000]);
  assert.deepEqual(ids('SELECT id FROM plants WHERE id = -7'), []);
  assert.deepEqual(ids(`SELECT id FROM plants WHERE id = ${seedId(1999)}`), [Number(seedId(1999))]);
  assert.deepEqual(
    writer.prepare('SELECT count(*) FROM plants WHERE id = -7').pluck().all(),
    [1],
    'the commit did happen in the live database',
  );
  assert.deepEqual(
    [existsSync(join(at, `copy.db.partial-${process.pid}`)), existsSync(join(at, 'copy.db-journal'))],
    [false, false],
  );
});

test('backup refuses an existing file unless --force, and --force never replaces a database in use', async () => {
  const at = freshDir();
  const path = join(at, 'store.db');
  await seed(path, 10);
  const env = { DATABASE_URL: `sqlite:${path}` };
  const file = join(at, 'taken.db');
  writeFileSync(file, 'not to be lost');
  const refused = await runCli(['backup', file], env);
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /taken\.db exists: give another name, or --force to replace it/);
  assert.equal(readFileSync(file, 'utf8'), 'not to be lost');

  const forced = await runCli(['backup', '--force', file], env);
  assert.equal(forced.code, 0, forced.stderr);
  assert.equal(integrity(file), 'ok');

  writeFileSync(`${file}-wal`, '');
  const inUse = await runCli(['backup', '--force', file], env);
  assert.equal(inUse.code, 2);
  assert.match(inUse.stderr, /looks like a database in use/);

  const itself = await runCli(['backup', '--force', path], env);
  assert.equal(itself.code, 2);
  assert.match(itself.stderr, /is the database itself/);
  assert.equal(integrity(path), 'ok');

  await assert.rejects(backupSqlite(path, file), BackupRefusedError);
});

test('backup names what it cannot do: PostgreSQL (use pg_dump, no password shown), a missing file, memory, no file given', async () => {
  const at = freshDir();
  const postgres = await runCli(['backup', join(at, 'x.db')], {
    DATABASE_URL: 'postgres://app:pw-s3cret@db.example:5432/plants',
  });
  assert.equal(postgres.code, 2);
  assert.match(
    postgres.stderr,
    /pg_dump --format=custom --file=plant-store\.dump 'postgres:\/\/app@db\.example:5432\/plants'/,
  );
  assert.match(postgres.stderr, /pg_restore/);
  assert.doesNotMatch(postgres.stderr, /s3cret/);

  const missing = await runCli(['backup', join(at, 'x.db')], { DATABASE_URL: `sqlite:${join(at, 'nowhere', 'db')}` });
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /there is no database at sqlite:.*nowhere\/db .*check DATABASE_URL/);
  assert.equal(existsSync(join(at, 'nowhere')), false, 'no database was created to be backed up');

  const memory = await runCli(['backup', join(at, 'x.db')], { DATABASE_URL: 'sqlite::memory:' });
  assert.equal(memory.code, 2);
  assert.match(memory.stderr, /nothing to back up/);

  const usage = await runCli(['backup'], { DATABASE_URL: `sqlite:${join(at, 'db')}` });
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /^plant-store: backup takes one file/);
  assert.equal(existsSync(join(at, 'x.db')), false);
});

// The second walkthrough, point 3: a folder that cannot be made spun in Node's recursive mkdir (for
// ever on /proc, deaf to SIGTERM); it is refused, nothing done. Killed by its pid past 30 s.
test('backup refuses a file whose folder cannot be made (under /proc, under a regular file): exit 2, nothing done', async () => {
  const at = freshDir();
  const path = join(at, 'store.db');
  await seed(path, 1);
  const file = join(at, 'a-file');
  writeFileSync(file, 'not a folder');
  for (const [destination, folder] of [
    ['/proc/x/copy.db', '/proc/x'],
    [join(file, 'copies', 'copy.db'), join(file, 'copies')],
  ] as const) {
    const refused = await runCliWithin(30_000, ['backup', destination], { DATABASE_URL: `sqlite:${path}` });
    assert.equal(refused.code, 2, refused.stderr);
    assert.ok(refused.stderr.includes(`plant-store: cannot make the folder ${folder}`), refused.stderr);
    assert.match(refused.stderr, /give a file in a folder this process can create or write\n$/);
  }
  assert.equal(readFileSync(file, 'utf8'), 'not a folder');
});
