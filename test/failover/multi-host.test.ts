import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { type TestContext, after, before, test } from 'node:test';
import { postgresMigrations } from '../../src/store/postgres/migrations.js';
import { type PostgresStore, openPostgres } from '../../src/store/postgres/store.js';
import { callServer, runCli, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { servedApp } from '../support/served-app.js';
import { type ReplicaPair, silentProxy, startReplicaPair } from './replica-pair.js';

// Interface 1.3.0, "PostgreSQL with more than one server", against two real servers of this
// machine: a primary and its streaming standby (replica-pair.ts). One DATABASE_URL names both;
// target_session_attrs=read-write sends every connection to the primary whatever the order; while
// no server takes writes a request waits DATABASE_FAILOVER_WAIT, then answers 503 with Retry-After
// and /readyz says false; once the standby is promoted the same store writes there, with no
// restart, and says so in one warn line.

let pair: ReplicaPair;
const stores: PostgresStore[] = [];
const pairs: ReplicaPair[] = [];
before(async () => {
  pair = await startReplicaPair();
  pairs.push(pair);
});
after(async () => {
  for (const store of stores) await store.close().catch(() => {});
  for (const each of pairs) await each.close();
});

/** An app over `store` as `serve` builds it, a token of alice's, and a call with it. */
function served(t: TestContext, store: PostgresStore, failoverWaitMs: number) {
  return servedApp(store, (close) => t.after(close), { config: { databaseFailoverWaitMs: failoverWaitMs } });
}

function open(url: string, failoverWaitMs = 1500): { store: PostgresStore; moves: string[] } {
  const moves: string[] = [];
  const store = openPostgres(url, { failoverWaitMs, onHostChange: (now, was) => moves.push(`${was ?? '-'} → ${now}`) });
  stores.push(store);
  return { store, moves };
}

/** Until the standby has replayed all the primary has written so far: the pair's replication is asynchronous. */
async function standbyCaughtUp(): Promise<void> {
  const { lsn } = (await pair.sql(pair.primary, 'SELECT pg_current_wal_lsn()::text AS lsn')).rows[0] as { lsn: string };
  await eventually(
    async () => {
      const { rows } = await pair.sql(pair.standby, `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS done`);
      return (rows[0] as { done: boolean }).done ? true : undefined;
    },
    `the standby replayed the primary's WAL up to ${lsn}`,
    60_000,
  );
}

const plant = (id: bigint, name: string) => ({ id, owner: 'alice', name, tag: null });
const PAGE = { owner: 'alice', tag: null, fromId: -(2n ** 63n), limit: 10 };

test('read-write with the standby named first: migrations, writes and reads go to the primary', async () => {
  const { store, moves } = open(pair.url([pair.standby, pair.primary], 'target_session_attrs=read-write'));
  await store.migrate();
  assert.deepEqual(await store.createPlant(plant(1n, 'Fern')), { created: true });
  assert.equal((await store.createPlant(plant(1n, 'Fern'))).created, false);
  assert.equal((await store.listPlants(PAGE)).length, 1);
  const onPrimary = await pair.sql(pair.primary, 'SELECT name FROM plants WHERE id = 1');
  assert.deepEqual(onPrimary.rows, [{ name: 'Fern' }]);
  assert.deepEqual(store.databaseRoute(), { host: `127.0.0.1:${pair.primary.port}`, waiting: 0, refused: new Map() });
  assert.deepEqual(moves, [`- → 127.0.0.1:${pair.primary.port}`]);
  assert.equal(await store.isReady(), true);
});

test('any: the first server that answers, a standby too, and a write there fails as a read-only one', async () => {
  // The reads below go to the standby: it must have the tables and the plant the test above wrote.
  await standbyCaughtUp();
  const { store: routed } = open(pair.url([pair.standby, pair.primary], 'target_session_attrs=any'));
  assert.equal((await routed.listPlants(PAGE)).length, 1);
  assert.deepEqual(
    routed.databaseRoute(),
    { host: `127.0.0.1:${pair.standby.port}`, waiting: 0, refused: new Map() },
    'the first that answers',
  );
  await assert.rejects(routed.createPlant(plant(9n, 'Nope')), /read-only|unavailable/i);
  const { store: standbys } = open(pair.url([pair.primary, pair.standby], 'target_session_attrs=standby'));
  assert.equal((await standbys.listPlants(PAGE)).length, 1);
  assert.deepEqual(standbys.databaseRoute(), {
    host: `127.0.0.1:${pair.standby.port}`,
    waiting: 0,
    refused: new Map(),
  });
});

test('a failover: no primary → a request waits, then 503 with Retry-After and /readyz false; promoted → writes, no restart', async (t) => {
  const { store, moves } = open(pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write'), 1500);
  const { app, lines, call } = await served(t, store, 1500);
  assert.equal((await call('POST', '/plants', '{"id":2,"name":"Moss"}')).statusCode, 200);

  // The primary goes as a crash takes it; the standby is not promoted yet: nothing takes writes.
  await pair.stop(pair.primary, 'kill');
  const started = Date.now();
  const refused = await call('POST', '/plants', '{"id":3,"name":"Ivy"}');
  const waited = Date.now() - started;
  assert.equal(refused.statusCode, 503, refused.payload);
  assert.ok(refused.headers['retry-after'], 'Retry-After');
  assert.deepEqual(Object.keys(refused.json<object>()).sort(), ['error', 'message']);
  assert.ok(waited >= 1000, `it waited for a primary (${waited} ms)`);
  const ready = await app.inject({ method: 'GET', url: '/readyz' });
  assert.equal(ready.statusCode, 503);

  // The failover manager's move: promote the standby. The same app writes there.
  await pair.promote(pair.standby);
  const promoted = Date.now();
  let answer = await call('POST', '/plants', '{"id":3,"name":"Ivy"}');
  while (answer.statusCode === 503 && Date.now() - promoted < 30_000)
    answer = await call('POST', '/plants', '{"id":3,"name":"Ivy"}');
  t.diagnostic(`first write ${Date.now() - promoted} ms after the promotion`);
  assert.equal(answer.statusCode, 200, answer.payload);
  assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
  const rows = (await pair.sql(pair.standby, 'SELECT id::text, name FROM plants ORDER BY id')).rows;
  assert.deepEqual(rows, [
    { id: '1', name: 'Fern' },
    { id: '2', name: 'Moss' },
    { id: '3', name: 'Ivy' },
  ]);
  assert.deepEqual(moves, [
    `- → 127.0.0.1:${pair.primary.port}`,
    `127.0.0.1:${pair.primary.port} → 127.0.0.1:${pair.standby.port}`,
  ]);
  assert.deepEqual(store.databaseRoute(), { host: `127.0.0.1:${pair.standby.port}`, waiting: 0, refused: new Map() });
  const metrics = await app.inject({ method: 'GET', url: '/metrics' });
  assert.match(
    metrics.payload,
    new RegExp(`^plant_store_database_host\\{host="127.0.0.1:${pair.standby.port}"\\} 1$`, 'm'),
  );
  assert.match(metrics.payload, /^plant_store_database_waiting_requests 0$/m);
  assert.ok(!lines.join('').includes('password'), 'no password anywhere');
});

test('a planned switchover under 8 writers: the primary stopped fast, the standby promoted a second later; no request fails, nothing acknowledged is lost', async (t) => {
  const fresh = await startReplicaPair();
  pairs.push(fresh);
  const { store, moves } = open(fresh.url([fresh.primary, fresh.standby], 'target_session_attrs=read-write'), 10_000);
  await store.migrate();
  const { call } = await served(t, store, 10_000);
  const created = new Set<number>();
  const deleted = new Set<number>();
  const failures: string[] = [];
  let stop = false;
  const writer = async (w: number): Promise<void> => {
    for (let i = 0; !stop; i++) {
      const id = 1000 * (w + 1) + i;
      const made = await call('POST', '/plants', `{"id":${id},"name":"p${id}"}`);
      if (made.statusCode !== 200) failures.push(`POST ${id}: ${made.statusCode} ${made.payload}`);
      else created.add(id);
      if (i % 2 === 1) {
        const gone = await call('DELETE', `/plants/${id - 1}`);
        if (gone.statusCode !== 204) failures.push(`DELETE ${id - 1}: ${gone.statusCode} ${gone.payload}`);
        else deleted.add(id - 1);
      }
    }
  };
  const writers = Array.from({ length: 8 }, (_, w) => writer(w));
  const acknowledgedBefore = async (n: number): Promise<void> => {
    while (created.size < n) await new Promise((resolve) => setTimeout(resolve, 20));
  };
  await acknowledgedBefore(100);
  const switched = Date.now();
  await fresh.stop(fresh.primary, 'fast'); // what Patroni's switchover does to the old primary
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await fresh.promote(fresh.standby);
  const promoted = Date.now();
  const atPromotion = created.size;
  await acknowledgedBefore(atPromotion + 100);
  stop = true;
  await Promise.all(writers);
  t.diagnostic(
    `switchover: ${created.size} creates and ${deleted.size} deletes acknowledged; promotion ${promoted - switched} ms after the stop`,
  );
  assert.deepEqual(failures, []);
  const rows = (await fresh.sql(fresh.standby, 'SELECT id::int AS id FROM plants')).rows as Array<{ id: number }>;
  const held = new Set(rows.map((r) => r.id));
  const lost = [...created].filter((id) => !deleted.has(id) && !held.has(id));
  const back = [...deleted].filter((id) => held.has(id));
  assert.deepEqual(lost, [], 'every acknowledged create is on the new primary');
  assert.deepEqual(back, [], 'no acknowledged delete came back');
  assert.equal(moves.at(-1), `127.0.0.1:${fresh.primary.port} → 127.0.0.1:${fresh.standby.port}`);
});

test('the commands take the multi-host URL (migrate, token create and list go to the primary named second); no password printed', async () => {
  const fresh = await startReplicaPair();
  pairs.push(fresh);
  // The standby first, and a password the servers do not need (trust): it must appear nowhere.
  const url = fresh
    .url([fresh.standby, fresh.primary], 'target_session_attrs=read-write&connect_timeout=2')
    .replace('postgres@', 'postgres:hunter2@');
  const env = { DATABASE_URL: url };
  const migrated = await runCli(['migrate'], env);
  assert.equal(migrated.code, 0, migrated.stderr);
  const described = `postgres://postgres@127.0.0.1:${fresh.standby.port},127.0.0.1:${fresh.primary.port}/postgres?target_session_attrs=read-write`;
  assert.match(migrated.stderr, new RegExp(`^plant-store: database ${described.replace(/[?.]/g, '\\$&')}`, 'm'));
  const versions = postgresMigrations.map((m) => m.version).join(', ');
  assert.ok((migrated.stdout + migrated.stderr).includes(`Applied migrations ${versions}.`), migrated.stdout);
  const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--json'], env);
  assert.equal(minted.code, 0, minted.stderr);
  const listed = await runCli(['token', 'list', '--json'], env);
  assert.equal(listed.code, 0, listed.stderr);
  assert.equal((JSON.parse(listed.stdout) as unknown[]).length, 1);
  const tokens = (await fresh.sql(fresh.primary, 'SELECT subject FROM api_tokens')).rows;
  assert.deepEqual(tokens, [{ subject: 'alice' }]);
  for (const result of [migrated, minted, listed]) assert.ok(!`${result.stdout}${result.stderr}`.includes('hunter2'));
});

// The createdb hint of a database that does not exist, with several servers.
// Every server answers 3D000, so no server is "read-write": before, the start waited
// DATABASE_FAILOVER_WAIT and said only that; now it stops at once with a createdb command that
// names every server and the URL's target_session_attrs, and that command, run as printed, creates
// the database on the primary (named second: createdb alone would ask the standby, which refuses).
test('a database that does not exist, on the multi-host URL: the printed createdb, run as printed, creates it on the primary; no password', async () => {
  const fresh = await startReplicaPair();
  pairs.push(fresh);
  const url = fresh
    .url([fresh.standby, fresh.primary], 'target_session_attrs=read-write')
    .replace('postgres@', 'postgres:hunter2@')
    .replace('/postgres?', '/plants_made?');
  const env = { DATABASE_URL: url };
  const failed = await runCli(['migrate'], env);
  assert.equal(failed.code, 1, failed.stdout);
  const command = `PGTARGETSESSIONATTRS=read-write createdb -h 127.0.0.1,127.0.0.1 -p ${fresh.standby.port},${fresh.primary.port} -U postgres plants_made`;
  assert.ok(
    failed.stderr.includes(
      `plant-store: database "plants_made" does not exist: create it with ${command}, then run this again\n`,
    ),
    failed.stderr,
  );
  assert.ok(!`${failed.stdout}${failed.stderr}`.includes('hunter2'), 'no password shown');
  // As printed, in a shell (createdb of PostgreSQL's client, as CI installs it).
  const made = await new Promise<{ code: number; stderr: string }>((resolve) =>
    execFile('sh', ['-c', command], { timeout: 30_000 }, (error, _stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }),
    ),
  );
  assert.equal(made.code, 0, made.stderr);
  const migrated = await runCli(['migrate'], env);
  assert.equal(migrated.code, 0, migrated.stderr);
  const onPrimary = await fresh.sql(fresh.primary, "SELECT 1 FROM pg_database WHERE datname = 'plants_made'");
  assert.equal(onPrimary.rowCount, 1);
});

test('serve on the multi-host URL: after the primary dies and the standby is promoted, one warn line names the move, and the metric follows', async () => {
  const fresh = await startReplicaPair();
  pairs.push(fresh);
  const url = fresh.url([fresh.primary, fresh.standby], 'target_session_attrs=read-write');
  const server = await startServer({ DATABASE_URL: url, DATABASE_FAILOVER_WAIT: '2s' });
  try {
    const token = await mintCliToken({ DATABASE_URL: url }, 'alice', 'plants:write');
    assert.equal((await callServer(server, token, 'POST', '/plants', '{"id":1,"name":"Fern"}')).status, 200);
    const first = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(first, new RegExp(`^plant_store_database_host\\{host="127.0.0.1:${fresh.primary.port}"\\} 1$`, 'm'));
    await fresh.stop(fresh.primary, 'kill');
    await fresh.promote(fresh.standby);
    let answer = await callServer(server, token, 'POST', '/plants', '{"id":2,"name":"Moss"}');
    for (let i = 0; answer.status !== 200 && i < 20; i++) {
      answer = await callServer(server, token, 'POST', '/plants', '{"id":2,"name":"Moss"}');
    }
    assert.equal(answer.status, 200, answer.text);
    const moved = server
      .logs()
      .split('\n')
      .filter((line) => line.includes('database: writing to'));
    assert.equal(moved.length, 1, moved.join('\n'));
    const line = JSON.parse(moved[0]!) as Record<string, unknown>;
    assert.equal(line.level, 40);
    assert.equal(line.msg, `database: writing to 127.0.0.1:${fresh.standby.port}, was 127.0.0.1:${fresh.primary.port}`);
    const after = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(after, new RegExp(`^plant_store_database_host\\{host="127.0.0.1:${fresh.standby.port}"\\} 1$`, 'm'));
    assert.match(after, /^plant_store_database_waiting_requests 0$/m);
  } finally {
    await server.stop();
  }
});

test('a server that stops answering without a reset: the statement on it times out, the next connection finds the promoted standby', async (t) => {
  const fresh = await startReplicaPair();
  pairs.push(fresh);
  const proxy = await silentProxy(fresh.primary.port);
  t.after(() => proxy.close());
  const url = `postgres://postgres@127.0.0.1:${proxy.port},127.0.0.1:${fresh.standby.port}/postgres?target_session_attrs=read-write&connect_timeout=2`;
  const { store, moves } = open(url, 20_000);
  await store.migrate();
  assert.deepEqual(await store.createPlant(plant(1n, 'Fern')), { created: true });
  proxy.vanish();
  const started = Date.now();
  const write = store.createPlant(plant(2n, 'Moss')); // on a pooled connection to the server that vanished
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await fresh.stop(fresh.primary, 'kill'); // what a failover manager makes sure of before it promotes
  await fresh.promote(fresh.standby);
  assert.deepEqual(await write, { created: true });
  t.diagnostic(
    `the write answered ${Date.now() - started} ms after the server vanished (the statement timeout is 15 s)`,
  );
  const rows = (await fresh.sql(fresh.standby, 'SELECT id::int AS id FROM plants ORDER BY id')).rows;
  assert.deepEqual(rows, [{ id: 1 }, { id: 2 }]);
  assert.equal(moves.at(-1), `127.0.0.1:${proxy.port} → 127.0.0.1:${fresh.standby.port}`);
});
