import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ServerProcess, callServer, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { skipWithout, startCluster } from './cluster.js';

// Patroni's `synchronous_mode_strict`, run (cluster.ts: two PostgreSQL 15
// nodes, etcd; no HAProxy, the service on the multi-host URL). The standby's Patroni and
// PostgreSQL are killed, by pid, and Patroni sees it go. What a client sees: a create is not
// acknowledged while no synchronous standby exists (its COMMIT waits in PostgreSQL for syncrep)
// but answered 503 with Retry-After at the service's deadline (3 s to connect +
// DATABASE_FAILOVER_WAIT); reads, /readyz and plant_store_database_up go on; no reader sees the
// waiting plants. The standby back, a create answered 503 may be there (its commit waited, it did
// not fail), the identical retries answer 200, and every plant answered 200 is in the database.
// Then the same cluster made non-strict (`patronictl edit-config`, the runbook's remedy): with the
// standby killed again and seen gone, a create is acknowledged (Patroni dropped the requirement).

/** Debian's patroni and etcd-server: CI installs them; elsewhere the test says what is missing. */
const skip = skipWithout(['/usr/bin/patroni', '/usr/bin/etcd'], 'patroni etcd-server');

/** The service's wait for a primary, short to keep the test short: a create's deadline is 3 s more. */
const FAILOVER_WAIT = '2s';

interface Answer {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly text: string;
  /** From the request to its answer. */
  readonly ms: number;
}

async function create(server: ServerProcess, token: string, id: number): Promise<Answer> {
  const started = Date.now();
  const answer = await callServer(server, token, 'POST', '/plants', JSON.stringify({ id, name: `plant ${id}` }));
  return {
    status: answer.status,
    retryAfter: answer.headers.get('retry-after'),
    text: answer.text,
    ms: Date.now() - started,
  };
}

/** One sample of a scrape, by its name and labels as printed; undefined when absent. */
function sample(scrape: string, series: string): number | undefined {
  const line = scrape.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test(
  'synchronous_mode_strict, the standby killed: a create is answered 503 with Retry-After, not acknowledged; reads and /readyz go on; the standby back, nothing acknowledged lost; non-strict, writes go on',
  { timeout: 300_000, skip },
  async (t) => {
    const c = await startCluster({ nodes: 2, synchronous: 'strict', haproxy: false });
    t.after(() => c.stop());
    const config = await c.effectiveConfig();
    assert.equal(config.synchronous_mode_strict, true);
    const leader = await c.waitForLeader(10_000);
    const standby = c.nodes.find((n) => n.name !== leader.name)!;
    await c.psql(leader.name, 'CREATE DATABASE plants');
    const env = { RATE_LIMIT: 'off', DATABASE_URL: c.multiHostUrl('plants'), DATABASE_FAILOVER_WAIT: FAILOVER_WAIT };
    const server = await startServer(env);
    t.after(() => server.stop());
    const token = await mintCliToken(env);
    /** Until Patroni has seen the standby go: the leader's /sync key names no sync standby. */
    const noSyncStandby = () =>
      eventually(
        async () => ((await c.syncStandby()) === undefined ? true : undefined),
        'Patroni naming no sync standby',
      );
    /** Every plant answered 200: each must be in the database at the end. */
    const acknowledged = new Set<number>();
    const first = await create(server, token, 1);
    assert.equal(first.status, 200, first.text);
    acknowledged.add(1);

    // Strict, the standby gone: creates wait in PostgreSQL (SyncRep) and the service answers 503.
    const { at: killedAt } = await c.killNode(standby.name);
    await noSyncStandby();
    const stalled = [2, 3, 4].map((id) => create(server, token, id));
    await eventually(
      async () =>
        (
          await c.psql(
            leader.name,
            "SELECT 1 FROM pg_stat_activity WHERE datname = 'plants' AND wait_event = 'SyncRep'",
          )
        ).length > 0
          ? true
          : undefined,
      'a COMMIT waiting for the synchronous standby',
    );
    // Meanwhile reads go on, and no reader sees a plant whose commit waits: /readyz says ready.
    const ready = await fetch(`${server.url}/readyz`);
    assert.equal(ready.status, 200, 'reads go on: /readyz stays ready');
    const listed = await callServer(server, token, 'GET', '/plants');
    assert.equal(listed.status, 200);
    assert.deepEqual(
      (JSON.parse(listed.text) as Array<{ name: string }>).map((p) => p.name),
      ['plant 1'],
      'a plant whose commit waits for the standby is visible to no reader',
    );
    const refused = await Promise.all(stalled);
    const answeredAt = Date.now();
    for (const answer of refused) {
      assert.equal(answer.status, 503, answer.text);
      assert.match(answer.retryAfter ?? '', /^[1-9][0-9]*$/, 'Retry-After, whole seconds');
    }
    const scrape = await (await fetch(`${server.url}/metrics`)).text();
    assert.equal(sample(scrape, 'plant_store_http_requests_total{method="POST",route="/plants",status="503"}'), 3);
    assert.equal(sample(scrape, 'plant_store_database_up'), 1, 'the database answers: only writes stall');
    assert.equal(sample(scrape, 'plant_store_database_waiting_requests'), 0, 'no request waits for a primary');
    assert.equal(sample(scrape, `plant_store_database_host{host="127.0.0.1:${leader.port}"}`), 1);
    const onLeader = async () =>
      (await c.psql<{ id: string }>(c.nodeUrl(leader.name, 'plants'), 'SELECT id::text FROM plants ORDER BY id')).map(
        (r) => Number(r.id),
      );
    assert.deepEqual(await onLeader(), [1], 'the waiting commits are visible on the primary to no one');

    // The standby back: the waiting commits complete; the identical retries are answered 200.
    const restartedAt = Date.now();
    await c.restartNode(standby.name);
    await c.waitForReplicaStreaming(standby.name, 60_000, { sync: true });
    const backAt = Date.now();
    // A 503 is not a "no": the create that waited in SyncRep was committed on the primary, and
    // became visible once the standby confirmed it.
    const refusedThere = await eventually(async () => {
      const ids = (await onLeader()).filter((id) => id !== 1);
      return ids.length > 0 ? ids : undefined;
    }, 'a create answered 503 committed once the standby confirmed it');
    for (const id of [2, 3, 4]) {
      const retried = await create(server, token, id);
      assert.equal(retried.status, 200, `the retry of ${id}: ${retried.text}`);
      acknowledged.add(id);
    }

    // Non-strict synchronous_mode (the runbook's `patronictl edit-config`): writes go on without the standby.
    await c.patronictl('edit-config', '-s', 'synchronous_mode_strict=false', '--force');
    await eventually(
      async () => ((await c.effectiveConfig()).synchronous_mode_strict === false ? true : undefined),
      'Patroni applying synchronous_mode_strict=false',
    );
    await c.killNode(standby.name);
    await noSyncStandby();
    const alone = await create(server, token, 5);
    assert.equal(alone.status, 200, `non-strict, the standby down: ${alone.text}`);
    acknowledged.add(5);

    // Nothing acknowledged lost.
    const held = new Set(await onLeader());
    assert.deepEqual(
      [...acknowledged].filter((id) => !held.has(id)),
      [],
      'plants answered 200 missing',
    );

    t.diagnostic(
      `strict, standby killed: 3 creates answered ${refused.map((a) => `${a.status} in ${a.ms} ms (Retry-After ${a.retryAfter})`).join(', ')}; deadline 3 s + DATABASE_FAILOVER_WAIT ${FAILOVER_WAIT}; first answer ${Math.min(...refused.map((a) => a.ms))} ms, kill → last answer ${answeredAt - killedAt} ms`,
    );
    t.diagnostic(
      `standby restarted → sync standby again ${backAt - restartedAt} ms; of the 3 refused creates, in the database before their retry: ${refusedThere.join(', ') || 'none'}`,
    );
    t.diagnostic(`non-strict, standby killed: a create answered ${alone.status} in ${alone.ms} ms`);
    const warnings = server
      .logs()
      .split('\n')
      .filter((line) => /"level":(40|50)|database/.test(line));
    t.diagnostic(`the service's lines on the database:\n${warnings.join('\n')}`);
  },
);
