import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import pg from 'pg';
import { alive, clusterProcesses, startCluster } from './cluster.js';

/**
 * The failover harness, proven on this machine: a 2-node synchronous Patroni cluster with etcd and
 * HAProxy; a row written through HAProxy is read on the replica; the replica frozen (every process
 * of it stopped) and thawed; the primary SIGKILLed (Patroni, PostgreSQL and every backend: none
 * lives on) and the time until the other node leads and takes writes (through HAProxy, directly,
 * and through the multi-host URL with libpq's psql) is measured; the old node comes back as a
 * replica; a switchover makes it the leader again; a node frozen at the end does not keep the stop
 * from ending; then everything stops and nothing of it is left.
 *
 * Not part of `npm test` (test/run.ts takes test/*\/*.test.ts; this file is named .check.ts):
 *     node --import tsx --test test/failover/cluster.check.ts
 * FAILOVER_RUNS=3 repeats the whole cycle.
 */

const PSQL = '/usr/lib/postgresql/15/bin/psql';

/** A process's state letter in /proc/<pid>/stat ('T' when stopped), undefined once it is gone. */
function stateOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}
const runs = Number(process.env.FAILOVER_RUNS ?? 1);

/** libpq's own client, for what node-postgres cannot do (multi-host URLs, target_session_attrs). */
function psqlBinary(url: string, sql: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      PSQL,
      ['-X', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c', sql, url],
      { env: { ...process.env, PGCONNECT_TIMEOUT: '3' }, timeout: 15_000 },
      (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout.trim())),
    );
  });
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

for (let run = 1; run <= runs; run++) {
  test(
    `Patroni cluster: failover, rejoin, switchover, clean stop (run ${run}/${runs})`,
    { timeout: 600_000 },
    async (t) => {
      const startedAt = Date.now();
      const cluster = await startCluster({
        nodes: 2,
        synchronous: 'on',
        haproxy: true,
        ttl: 10,
        loopWait: 1,
        retryTimeout: 4,
      });
      t.after(() => cluster.stop());
      const startMs = Date.now() - startedAt;
      const { dir, scope, settings } = cluster;

      // The start: one leader, the other its sync standby, HAProxy on the leader.
      const first = await cluster.waitForLeader(10_000);
      const other = cluster.nodes.find((n) => n.name !== first.name);
      assert.ok(other);
      await cluster.waitForReplicaStreaming(other.name, 30_000, { sync: true });
      assert.equal(await cluster.syncStandby(), other.name);
      assert.match(
        cluster.multiHostUrl('plants'),
        /^postgres:\/\/postgres@127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/plants\?target_session_attrs=read-write$/,
      );

      // A row through HAProxy, read on the replica.
      await cluster.psql('haproxy', 'CREATE TABLE harness_check (id int PRIMARY KEY, note text)');
      await cluster.psql('haproxy', "INSERT INTO harness_check VALUES (1, 'before the kill')");
      const [served] = await cluster.psql<{ port: number }>('haproxy', 'SELECT inet_server_port() AS port');
      assert.equal(served?.port, first.port, 'HAProxy routes to the leader');
      await waitFor(
        async () => (await cluster.psql(other.name, 'SELECT note FROM harness_check WHERE id = 1')).length === 1,
        10_000,
        'the row on the replica',
      );
      const [recovery] = await cluster.psql<{ r: boolean }>(other.name, 'SELECT pg_is_in_recovery() AS r');
      assert.equal(recovery?.r, true);

      // The replica frozen: Patroni, the postmaster and each of its children stopped; then thawed.
      const frozen = await cluster.freezeNode(other.name);
      assert.equal(cluster.node(other.name).frozen, true);
      const postmaster = cluster.node(other.name).postmasterPid();
      assert.ok(other.pid !== undefined && frozen.pids.includes(other.pid), 'Patroni frozen');
      assert.ok(postmaster !== undefined && frozen.pids.includes(postmaster), 'the postmaster frozen');
      assert.ok(frozen.pids.length >= 6, `Patroni, the postmaster and its children: ${frozen.pids.join(', ')}`);
      assert.deepEqual(
        frozen.pids.filter((pid) => stateOf(pid) !== 'T'),
        [],
        'every process of the frozen node stopped',
      );
      await cluster.thawNode(other.name);
      assert.equal(cluster.node(other.name).frozen, false);
      assert.deepEqual(
        cluster.nodeProcesses(other.name).filter((pid) => stateOf(pid) === 'T'),
        [],
        'every process of the thawed node runs',
      );
      await cluster.waitForReplicaStreaming(other.name, 60_000, { sync: true });

      // A backend of the leader held open across the kill: it must not outlive its postmaster.
      const held = new pg.Client({ connectionString: cluster.nodeUrl(first.name) });
      held.on('error', () => {});
      await held.connect();
      const [backend] = (await held.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
      const before = cluster.nodeProcesses(first.name);
      assert.ok(backend && before.includes(backend.pid), 'the backend is a process of the node');

      // SIGKILL the primary: how long until the other node leads and takes writes.
      const kill = await cluster.killPrimary();
      assert.equal(kill.node.name, first.name);
      assert.equal(kill.node.up, false);
      assert.deepEqual(before.filter(alive), [], 'no process of the killed node lives on, its backends included');
      await held.end().catch(() => {});
      const [leaderAfter, writeViaHaproxy, writeDirect] = await Promise.all([
        cluster.waitForLeader(60_000, { not: first.name }).then((node) => ({ node, at: Date.now() })),
        cluster.waitForWrite('haproxy', 60_000, 'first write via haproxy after kill'),
        cluster.waitForWrite(other.name, 60_000, `first write direct to ${other.name} after kill`),
      ]);
      assert.equal(leaderAfter.node.name, other.name);
      const multiHostWrite = await psqlBinary(
        cluster.multiHostUrl(),
        "INSERT INTO harness_check VALUES (2, 'after the kill') RETURNING inet_server_port()",
      );
      assert.match(multiHostWrite, new RegExp(`^${other.port}\\b`), 'the multi-host URL writes to the new leader');
      const failover = {
        leaderSeen: leaderAfter.at - kill.at,
        writeDirect: writeDirect - kill.at,
        writeViaHaproxy: writeViaHaproxy - kill.at,
      };

      // The killed node comes back as a replica of the new leader, with the row written since.
      const restartAt = Date.now();
      await cluster.restartNode(first.name);
      await cluster.waitForReplicaStreaming(first.name, 120_000, { sync: true });
      const rejoinMs = Date.now() - restartAt;
      await waitFor(
        async () => (await cluster.psql(first.name, 'SELECT 1 FROM harness_check WHERE id = 2')).length === 1,
        10_000,
        'the post-failover row on the old primary',
      );
      const log = readFileSync(first.logFile, 'utf8').slice(0, 10_000_000);
      const how = /pg_rewind exit code=0/.test(log)
        ? 'pg_rewind'
        : /reinitializ|basebackup/i.test(log)
          ? 'reinit (new base backup)'
          : 'rejoined without rewind (no divergence)';
      cluster.mark('rejoin', how, first.name);

      // Switchover back: both healthy, the old primary leads again.
      const switchAt = Date.now();
      const back = await cluster.switchover(first.name);
      assert.equal(back.name, first.name);
      await cluster.waitForReplicaStreaming(other.name, 60_000, { sync: true });
      const switchMs = Date.now() - switchAt;
      await cluster.waitForWrite('haproxy', 30_000, 'write via haproxy after switchover');
      const members = await cluster.members();
      assert.deepEqual(
        members.map((m) => [m.name, m.role, m.state]).sort(),
        [
          [first.name, 'leader', 'running'],
          [other.name, 'sync_standby', 'running'],
        ].sort(),
      );
      const list = await cluster.patronictl('list');
      // What Patroni applies (a later Patroni raises a ttl under 20 to 20; 3.0 takes it as given).
      const applied = await cluster.effectiveConfig();
      assert.equal(applied.ttl, settings.ttl);
      assert.equal(applied.loop_wait, settings.loopWait);
      assert.equal(applied.retry_timeout, settings.retryTimeout);
      assert.equal(applied.synchronous_mode, true);

      // Stop, a node frozen: it is killed, and nothing is left.
      await cluster.freezeNode(other.name);
      const stopAt = Date.now();
      await cluster.stop();
      const stopMs = Date.now() - stopAt;
      assert.deepEqual(clusterProcesses(dir, scope), []);
      const pgrep = await new Promise<string>((resolve) =>
        execFile('pgrep', ['-af', `${dir}|postgres: ${scope}:`], (_error, stdout) => resolve(stdout.trim())),
      );
      assert.equal(pgrep, '', 'no process of the cluster is left');
      assert.equal(existsSync(dir), false, 'the temporary folder is gone');

      console.log(
        [
          `Patroni settings: ttl ${settings.ttl} s, loop_wait ${settings.loopWait} s, retry_timeout ${settings.retryTimeout} s, ` +
            `synchronous ${settings.synchronous}, ${settings.nodes} nodes, HAProxy inter 1s fall 2 rise 1`,
          `start ${seconds(startMs)}; SIGKILL of ${first.name} → leader ${other.name} seen ${seconds(failover.leaderSeen)}, ` +
            `first write direct ${seconds(failover.writeDirect)}, via HAProxy ${seconds(failover.writeViaHaproxy)}; ` +
            `rejoin ${seconds(rejoinMs)} (${how}); switchover ${seconds(switchMs)}; stop ${seconds(stopMs)}`,
          list.trim(),
          'timeline (seconds from the kill):',
          cluster.formatTimeline('kill'),
        ].join('\n'),
      );
    },
  );
}

async function waitFor(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
