import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, createServer, get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type TestContext, test } from 'node:test';
import { testConfig } from '../../src/config.js';
import { startEventSide } from '../../src/event-side.js';
import { FAILOVER_WAIT_MS } from '../../src/store/postgres/connection.js';
import { openPostgres } from '../../src/store/postgres/store.js';
import { cleanupsInReverse } from '../support/cleanups.js';
import { eventually } from '../support/eventually.js';
import { servedApp } from '../support/served-app.js';
import { type Cluster, skipWithout, startCluster } from './cluster.js';

// A silent Patroni leader, with Patroni's own default timing (ttl 30 s, loop_wait 10 s,
// retry_timeout 10 s) and synchronous_mode: every process of the leader's node SIGSTOPped, Patroni
// and PostgreSQL alike (cluster.ts freezeNode), so no connection is reset or closed and nothing
// answers; the leader key expires after the TTL and Patroni promotes the sync standby. The service
// runs in this process over the multi-host URL (no HAProxy), with DATABASE_FAILOVER_WAIT at its
// default: its store and app, the webhook dispatcher beside them, 4 writers through app.inject, a
// Server-Sent Events reader of GET /events and a webhook receiver on 127.0.0.1. What must hold:
// nothing acknowledged is lost; once the new leader takes writes, every create sent is answered
// 200 (during the TTL a create may wait DATABASE_FAILOVER_WAIT and be answered 503 with
// Retry-After); the stream opened before the fault stays open and receives every event; every event
// is delivered, each webhook-id always with the same body. Timings are diagnostics, never asserted.

/** Debian's patroni and etcd-server: CI installs them; elsewhere the test says what is missing. */
const skip = skipWithout(['/usr/bin/patroni', '/usr/bin/etcd'], 'patroni etcd-server');

const SCOPES = ['plants:read', 'plants:write', 'webhooks:read', 'webhooks:write'];
/** How long the writers go on once the new leader takes writes. */
const WRITES_AFTER_MS = 8000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  readonly id: number;
  /** 0: no answer at all (a transport error), a failure like any other. */
  readonly status: number;
  readonly retryAfter: string | undefined;
  readonly body: string;
  readonly sentAt: number;
  readonly answeredAt: number;
}

/** `writers` loops creating plants of ids of their own until stop(); every answer kept. */
function writeLoops(send: (id: number) => Promise<Omit<Answer, 'id' | 'sentAt' | 'answeredAt'>>, writers: number) {
  const answers: Answer[] = [];
  let stopping = false;
  let next = 1;
  const loops = Array.from({ length: writers }, async () => {
    while (!stopping) {
      const id = next++;
      const sentAt = Date.now();
      let answer: Omit<Answer, 'id' | 'sentAt' | 'answeredAt'>;
      try {
        answer = await send(id);
      } catch (error) {
        answer = { status: 0, retryAfter: undefined, body: String(error) };
      }
      answers.push({ id, ...answer, sentAt, answeredAt: Date.now() });
      if (answer.status !== 200) await sleep(100); // no busy loop while refused
    }
  });
  return {
    answers,
    async stop(): Promise<void> {
      stopping = true;
      await Promise.all(loops);
    },
  };
}

/** GET /events as an EventSource reads it, on 127.0.0.1: every event's id and data, as they arrive. */
async function follow(port: number, token: string) {
  const seen = new Map<string, string>();
  let repeated = 0;
  const request = get({
    host: '127.0.0.1',
    port,
    path: '/events',
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  const [response] = (await once(request, 'response')) as [IncomingMessage];
  assert.equal(response.statusCode, 200);
  let buffered = '';
  let ended: string | undefined;
  response.setEncoding('utf8');
  response.on('data', (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const id = /^id: (\d+)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1];
      if (id === undefined || data === undefined) continue;
      if (seen.has(id)) repeated += 1;
      seen.set(id, data);
    }
  });
  response.on('end', () => void (ended ??= 'ended'));
  response.on('error', (error) => void (ended ??= `error: ${error.message}`));
  request.on('error', (error) => void (ended ??= `error: ${error.message}`));
  return { seen, repeated: () => repeated, ended: () => ended, close: () => request.destroy() };
}

/** A webhook receiver on 127.0.0.1 answering 200, keeping every body received under each webhook-id. */
async function receiver() {
  const bodies = new Map<string, string[]>();
  let requests = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      requests += 1;
      const id = String(req.headers['webhook-id']);
      bodies.set(id, [...(bodies.get(id) ?? []), body]);
      res.writeHead(200).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    bodies,
    requests: () => requests,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** id → the column `value` of `table` on one node (id as text: int64 stays exact). */
async function rowsOn(cluster: Cluster, node: string, table: 'plants' | 'events'): Promise<Map<string, string>> {
  const column = table === 'plants' ? 'name' : 'payload';
  const rows = await cluster.psql<{ id: string; value: string }>(
    node,
    `SELECT id::text AS id, ${column} AS value FROM ${table}`,
  );
  return new Map(rows.map((row) => [row.id, row.value]));
}

test(
  "a frozen Patroni leader, Patroni's default timing: nothing acknowledged lost, no 503 once the new leader takes writes, every event streamed and delivered the same",
  { timeout: 240_000, skip },
  async (t: TestContext) => {
    const cleanups = cleanupsInReverse(t);
    const c = await startCluster({
      nodes: 2,
      synchronous: 'on',
      haproxy: false,
      ttl: 30,
      loopWait: 10,
      retryTimeout: 10,
    });
    cleanups.push(() => c.stop());
    const applied = await c.effectiveConfig();
    assert.deepEqual(
      [applied.ttl, applied.loop_wait, applied.retry_timeout, applied.synchronous_mode],
      [30, 10, 10, true],
      'Patroni applies its default timing, and synchronous_mode',
    );
    const old = await c.waitForLeader(30_000);
    const next = c.nodes.find((n) => n.name !== old.name)!;
    await c.waitForReplicaStreaming(next.name, 60_000, { sync: true });

    const hook = await receiver();
    cleanups.push(() => hook.close());
    let faultAt = 0;
    const since = () => (faultAt === 0 ? 'before the fault' : `${Date.now() - faultAt} ms after the fault`);
    const changes: string[] = [];
    const store = openPostgres(c.multiHostUrl('postgres'), {
      failoverWaitMs: FAILOVER_WAIT_MS,
      poolSize: 8,
      onHostChange: (now, was) => changes.push(`${since()}: writing to ${now}, was ${was}`),
      onHostLeft: (host, why) => changes.push(`${since()}: left ${host}: ${why}`),
      onHostRefused: (host, why) => void (why !== undefined && changes.push(`${since()}: refused ${host}: ${why}`)),
    });
    cleanups.push(() => store.close());
    await store.migrate();
    const { app, config, token, port } = await servedApp(store, (close) => cleanups.push(close), {
      config: { rateLimit: null, events: { ...testConfig().events, allowPrivateTargets: true } },
      listen: true,
      scopes: SCOPES,
    });
    assert.equal(config.databaseFailoverWaitMs, FAILOVER_WAIT_MS, "DATABASE_FAILOVER_WAIT's default");
    const side = startEventSide(store, config.events, app.log, () => 0);
    cleanups.push(() => side.stop());
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const made = await app.inject({ method: 'POST', url: '/webhooks', headers: auth, payload: { url: hook.url } });
    assert.equal(made.statusCode, 201, made.body);
    const stream = await follow(port, token);
    cleanups.push(() => stream.close());

    const writers = writeLoops(async (id) => {
      const answer = await app.inject({
        method: 'POST',
        url: '/plants',
        headers: auth,
        payload: `{"id":${id},"name":"plant ${id}"}`,
      });
      const retryAfter = answer.headers['retry-after'];
      return {
        status: answer.statusCode,
        retryAfter: retryAfter === undefined ? undefined : String(retryAfter),
        body: answer.body,
      };
    }, 4);
    cleanups.push(() => writers.stop());
    await eventually(
      async () => (writers.answers.filter((a) => a.status === 200).length >= 200 ? true : undefined),
      'writes under way',
      30_000,
    );

    // The fault: the leader's node silent. Meanwhile the standby is asked, directly, whether it
    // takes writes yet: from its first `false`, every create sent must be answered 200.
    const frozen = await c.freezeNode(old.name);
    faultAt = frozen.at;
    cleanups.push(() => (c.node(old.name).frozen ? c.thawNode(old.name) : undefined));
    const writableAt = await eventually(
      async () => {
        const [row] = await c.psql<{ r: boolean }>(next.name, 'SELECT pg_is_in_recovery() AS r').catch(() => []);
        return row?.r === false ? Date.now() : undefined;
      },
      () => `${next.name} promoted (timeline:\n${c.formatTimeline('freeze')})`,
      120_000,
    );
    const leaderSeen = await c.waitForLeader(30_000, { not: old.name });
    const leaderSeenAt = Date.now();
    assert.equal(leaderSeen.name, next.name);
    await sleep(WRITES_AFTER_MS);
    await writers.stop();

    // Every create answered: 200, or before the new leader took writes 503 with Retry-After.
    const failed = writers.answers.filter(
      (a) => a.status !== 200 && !(a.status === 503 && a.sentAt < writableAt && /^[1-9]\d*$/.test(a.retryAfter ?? '')),
    );
    const when = (a: Answer) =>
      `sent ${a.sentAt - faultAt} ms after the fault (${a.sentAt - writableAt} ms after the new leader took writes), answered in ${a.answeredAt - a.sentAt} ms`;
    assert.deepEqual(
      failed.map((a) => `create ${a.id}: ${a.status} (Retry-After ${a.retryAfter}), ${when(a)}: ${a.body}`),
      [],
      'every create answered 200, or 503 with Retry-After while no server took writes',
    );
    const sentAfter = writers.answers.filter((a) => a.sentAt >= writableAt);
    assert.ok(sentAfter.length > 0, 'creates were sent after the new leader took writes');

    // Nothing acknowledged lost.
    const plants = await rowsOn(c, next.name, 'plants');
    const acknowledged = writers.answers.filter((a) => a.status === 200);
    assert.deepEqual(
      acknowledged.filter((a) => plants.get(String(a.id)) !== `plant ${a.id}`).map((a) => `${a.id}: ${when(a)}`),
      [],
      'every create answered 200 is on the new leader',
    );

    // The stream opened before the fault: open still, every event of the new leader received, the
    // same, and none it lacks (synchronous: no reader sees what a failover could lose).
    const events = await rowsOn(c, next.name, 'events');
    await eventually(
      async () => ([...events.keys()].every((id) => stream.seen.has(id)) ? true : undefined),
      () =>
        `the stream received every event of the new leader (${[...events.keys()].filter((id) => !stream.seen.has(id)).length} of ${events.size} missing; ended: ${stream.ended()})`,
      60_000,
    );
    assert.equal(stream.ended(), undefined, 'the stream opened before the fault stayed open');
    assert.deepEqual(
      [...stream.seen].filter(([id, data]) => events.get(id) !== data),
      [],
      'every event streamed is on the new leader, with the same data',
    );

    // Every event delivered to the webhook; a webhook-id sent again carries the same body.
    await eventually(
      async () => ([...events.keys()].every((id) => hook.bodies.has(`evt_${id}`)) ? true : undefined),
      () =>
        `every event delivered (${[...events.keys()].filter((id) => !hook.bodies.has(`evt_${id}`)).length} of ${events.size} not yet)`,
      90_000,
    );
    assert.deepEqual(
      [...hook.bodies].filter(([, bodies]) => bodies.some((body) => body !== bodies[0])),
      [],
      'a webhook-id delivered twice carries the same body',
    );
    assert.deepEqual(
      [...hook.bodies].filter(([id, bodies]) => events.get(id.replace(/^evt_/, '')) !== bodies[0]),
      [],
      'every delivery is an event of the new leader, its body the event',
    );

    assert.equal(store.databaseRoute()?.host, `127.0.0.1:${next.port}`, changes.join('; '));

    const refused = writers.answers.filter((a) => a.status === 503);
    const firstWrite = Math.min(...sentAfter.filter((a) => a.status === 200).map((a) => a.answeredAt));
    const firstAnsweredAfter = Math.min(
      ...acknowledged.filter((a) => a.answeredAt >= writableAt).map((a) => a.answeredAt),
    );
    const slowest = writers.answers.reduce((a, b) => (b.answeredAt - b.sentAt > a.answeredAt - a.sentAt ? b : a));
    const twice = [...hook.bodies.values()].filter((bodies) => bodies.length > 1).length;
    t.diagnostic(
      `Patroni ttl ${String(applied.ttl)} s, loop_wait ${String(applied.loop_wait)} s, retry_timeout ${String(applied.retry_timeout)} s, ` +
        `synchronous_mode ${String(applied.synchronous_mode)}; DATABASE_FAILOVER_WAIT ${config.databaseFailoverWaitMs} ms; ` +
        `${frozen.pids.length} processes of ${old.name} frozen`,
    );
    t.diagnostic(
      `freeze → ${next.name} takes writes (pg_is_in_recovery false) ${writableAt - faultAt} ms → Patroni names it leader ${leaderSeenAt - faultAt} ms; ` +
        `first 200 to a create sent after that ${firstWrite - writableAt} ms after it; first 200 answered after it ${firstAnsweredAfter - writableAt} ms after it`,
    );
    t.diagnostic(
      `${writers.answers.length} creates: ${acknowledged.length} answered 200, ${refused.length} answered 503 with Retry-After ` +
        `(sent ${refused.length ? `${Math.min(...refused.map((a) => a.sentAt)) - faultAt} to ${Math.max(...refused.map((a) => a.sentAt)) - faultAt}` : '-'} ms after the freeze, ` +
        `each in ${refused.length ? `${Math.min(...refused.map((a) => a.answeredAt - a.sentAt))} to ${Math.max(...refused.map((a) => a.answeredAt - a.sentAt))}` : '-'} ms); ` +
        `${sentAfter.length} sent after the new leader took writes, all 200; the slowest ${slowest.answeredAt - slowest.sentAt} ms (${slowest.status}, ${when(slowest)})`,
    );
    t.diagnostic(
      `0 acknowledged creates lost (${acknowledged.length} answered 200, all on the new leader); ` +
        `${refused.filter((a) => a.answeredAt >= writableAt).length} of the 503s answered after the new leader took writes (all sent before)`,
    );
    t.diagnostic(
      `${events.size} events on the new leader: ${stream.seen.size} streamed (${stream.repeated()} frames repeated), ` +
        `${hook.bodies.size} webhook-ids in ${hook.requests()} deliveries (${twice} delivered more than once, each time the same body)`,
    );
    t.diagnostic(`the store: ${changes.join('; ')}`);
    t.diagnostic(`timeline (seconds from the freeze):\n${c.formatTimeline('freeze')}`);
  },
);
