import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type TestContext, test } from 'node:test';
import { Follower } from '../e2e/event-follower.js';
import { type ServerProcess, callServer, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { type Cluster, skipWithout, startCluster } from './cluster.js';

// Failover with the real parts (cluster.ts): a Patroni cluster of two PostgreSQL
// 15 nodes in synchronous mode, etcd and HAProxy. Two instances of the service, one on the
// multi-host URL straight to the nodes, one through HAProxy (Patroni's GET /primary checks);
// 8 writers creating and deleting, a webhook subscribed, a poller of the JSON feed and an
// EventSource following the stream. The primary is SIGKILLed (unplanned: Patroni promotes the
// sync standby once the leader key expires), then, the old node back, `patronictl switchover`
// (planned). No instance is restarted. Checked: no 500 ever; no acknowledged create or delete
// lost; every event a reader saw before is there after, the same; no event id twice; the stream
// resumed; every acknowledged create's event delivered to the webhook; during the switchover no
// request failed at all.

const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';

/** Debian's patroni, etcd-server and haproxy: CI installs them; elsewhere the test says what is missing. */
const skip = skipWithout(['/usr/bin/patroni', '/usr/bin/etcd', '/usr/sbin/haproxy'], 'patroni etcd-server haproxy');

interface Outcome {
  /** When the request was sent, and when its answer came. */
  readonly started: number;
  readonly at: number;
  readonly status: number;
  readonly what: string;
}

/** Writers over HTTP: each creates plants of its own ids and deletes every other one it made. */
class Load {
  readonly outcomes: Outcome[] = [];
  readonly created = new Map<number, string>();
  readonly deleted = new Set<number>();
  private stopped = false;
  private readonly runs: Array<Promise<void>> = [];

  constructor(servers: readonly ServerProcess[], token: string, writers: number) {
    for (let w = 0; w < writers; w++) this.runs.push(this.writer(servers[w % servers.length]!, token, w));
  }

  private async writer(server: ServerProcess, token: string, w: number): Promise<void> {
    for (let i = 0; !this.stopped; i++) {
      const id = 100_000 * (w + 1) + i;
      const name = `plant ${id}`;
      const made = await this.call(server, token, 'POST', '/plants', JSON.stringify({ id, name }), `POST ${id}`);
      if (made === 200) this.created.set(id, name);
      if (made === 200 && i % 2 === 1) {
        const gone = await this.call(server, token, 'DELETE', `/plants/${id}`, undefined, `DELETE ${id}`);
        if (gone === 204) this.deleted.add(id);
      }
      if (made !== 200) await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async call(
    server: ServerProcess,
    token: string,
    method: string,
    path: string,
    body: string | undefined,
    what: string,
  ): Promise<number> {
    const started = Date.now();
    let status: number;
    try {
      status = (await callServer(server, token, method, path, body)).status;
    } catch {
      status = 0; // no answer at all
    }
    this.outcomes.push({ started, at: Date.now(), status, what });
    return status;
  }

  failures(from: number, to = Infinity): Outcome[] {
    return this.outcomes.filter((o) => o.at >= from && o.at <= to && o.status !== 200 && o.status !== 204);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.runs);
  }
}

/** A webhook receiver on 127.0.0.1 that answers 204 and keeps each delivery's event id and body. */
async function receiver(t: TestContext): Promise<{ url: string; events: Map<string, string> }> {
  const events = new Map<string, string>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      events.set(String(req.headers['webhook-id']), body);
      res.writeHead(204).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, events };
}

/** Every event the feed holds, as pages of JSON from the start: id → the event's JSON text. */
async function wholeFeed(server: ServerProcess, token: string): Promise<Map<string, string>> {
  const seen = new Map<string, string>();
  let after = '0';
  for (;;) {
    const page = await fetch(`${server.url}/events?after=${after}&limit=1000`, {
      headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    });
    assert.equal(page.status, 200);
    const text = await page.text();
    const ids = [...text.matchAll(/\{"id":(\d+),"type":"[^"]+","data":\{[^}]*\},"createdAt":"[^"]+"\}/g)];
    for (const m of ids) {
      assert.ok(!seen.has(m[1]!), `event ${m[1]} once`);
      seen.set(m[1]!, m[0]);
    }
    // A page short of the limit is the head of the feed as of that page: while writers run, the
    // next one may always have more.
    if (ids.length < 1000) return seen;
    after = ids.at(-1)![1]!;
  }
}

async function cluster(t: TestContext): Promise<Cluster> {
  const started = await startCluster({
    nodes: 2,
    synchronous: 'on',
    haproxy: true,
    ttl: 10,
    loopWait: 1,
    retryTimeout: 4,
  });
  t.after(() => started.stop());
  await started.psql('haproxy', 'CREATE DATABASE plants');
  return started;
}

test(
  'a Patroni failover and a switchover under load: nothing acknowledged lost, no event changed or repeated, no 500; the switchover fails nothing',
  { timeout: 600_000, skip },
  async (t) => {
    const c = await cluster(t);
    const settings = await c.effectiveConfig();
    const common = { RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1', DATABASE_FAILOVER_WAIT: '20s' };
    const direct = { ...common, DATABASE_URL: c.multiHostUrl('plants') };
    const proxied = { ...common, DATABASE_URL: `${c.haproxyUrl('plants')}?target_session_attrs=read-write` };
    const a = await startServer(direct);
    t.after(() => a.stop());
    const b = await startServer(proxied);
    t.after(() => b.stop());
    const token = await mintCliToken(direct, 'alice', SCOPES);
    const hook = await receiver(t);
    const made = await callServer(a, token, 'POST', '/webhooks', JSON.stringify({ url: hook.url }));
    assert.equal(made.status, 201, made.text);
    const stream = new Follower(b.url, token);
    t.after(() => stream.close());
    await stream.opened();

    // Unplanned: the primary SIGKILLed under load.
    const load = new Load([a, b], token, 8);
    await eventually(async () => (load.created.size >= 200 ? true : undefined), 'writes under way', 60_000);
    const seenBefore = await wholeFeed(a, token);
    const { node: killed, at: killedAt } = await c.killPrimary();
    await c.waitForLeader(60_000, { not: killed.name });
    const promotedAt = Date.now();
    // The first create sent after the kill and acknowledged: it waited for the new primary. (Those
    // sent before the kill and answered after the promotion say nothing of when writes came back.)
    const sentAfterKill = (): Outcome[] =>
      load.outcomes.filter((o) => o.started > killedAt && o.status === 200 && o.what.startsWith('POST'));
    await eventually(
      async () => (sentAfterKill().length > 0 ? true : undefined),
      'a create sent after the kill acknowledged',
      60_000,
    );
    const firstWrite = Math.min(...sentAfterKill().map((o) => o.at));
    await eventually(async () => (load.created.size >= 600 ? true : undefined), 'writes go on', 60_000);

    // Planned: the old node back as a replica, then a switchover to it.
    await c.restartNode(killed.name);
    await c.waitForReplicaStreaming(killed.name, 120_000, { sync: true });
    const switchStarted = Date.now();
    await c.switchover(killed.name);
    const switchedAt = Date.now();
    await eventually(async () => (load.created.size >= 1000 ? true : undefined), 'writes after the switchover', 60_000);
    const switchEnded = Date.now();
    await load.stop();

    t.diagnostic(
      `Patroni ttl ${String(settings.ttl)} s, loop_wait ${String(settings.loop_wait)} s, retry_timeout ${String(settings.retry_timeout)} s, synchronous_mode ${String(settings.synchronous_mode)}`,
    );
    t.diagnostic(
      `kill → new leader seen ${promotedAt - killedAt} ms → first acknowledged write sent after the kill ${firstWrite - killedAt} ms after it (${firstWrite - promotedAt} ms after the leader was seen); switchover ${switchedAt - switchStarted} ms`,
    );
    t.diagnostic(
      `${load.created.size} creates and ${load.deleted.size} deletes acknowledged; ${load.failures(0).length} requests not 2xx, all during the failover`,
    );
    t.diagnostic(c.formatTimeline('kill'));

    // No 500 ever; during the switchover nothing failed at all; after the failover only 503s (waited, then refused).
    assert.deepEqual(
      load.outcomes.filter((o) => o.status >= 500 && o.status !== 503),
      [],
    );
    assert.deepEqual(load.failures(switchStarted, switchEnded), [], 'the switchover failed no request');
    assert.ok(
      load.failures(0).every((o) => o.at >= killedAt && o.at <= firstWrite + 30_000),
      'failures only around the kill',
    );
    assert.ok(
      firstWrite - promotedAt <= 5000,
      `the first write ${firstWrite - promotedAt} ms after the promotion was seen`,
    );

    // Nothing acknowledged lost: on the leader now, every create not deleted is there; no delete came back.
    const now = await c.waitForLeader(10_000);
    const rows = await c.psql<{ id: string; name: string }>(
      c.nodeUrl(now.name, 'plants'),
      'SELECT id::text, name FROM plants',
    );
    const held = new Map(rows.map((r) => [Number(r.id), r.name]));
    const lost = [...load.created].filter(([id, name]) => !load.deleted.has(id) && held.get(id) !== name);
    assert.deepEqual(lost, [], 'acknowledged creates lost');
    assert.deepEqual(
      [...load.deleted].filter((id) => held.has(id)),
      [],
      'acknowledged deletes undone',
    );

    // The feed: every event seen before the kill is there, the same; no id twice (wholeFeed checks).
    const after = await wholeFeed(a, token);
    const changed = [...seenBefore].filter(([id, text]) => after.get(id) !== text);
    assert.deepEqual(changed, [], 'events seen before the failover, missing or changed after');

    // The stream resumed (Last-Event-ID) and saw every event of the feed once, in order.
    const last = [...after.keys()].at(-1)!;
    await eventually(async () => (stream.ids.includes(last) ? true : undefined), 'the stream caught up', 60_000);
    const expected = [...after.keys()].filter((id) => BigInt(id) >= BigInt(stream.ids[0]!));
    assert.deepEqual(stream.ids, expected, 'the stream: every event from its first, once, in order');

    // Every acknowledged create's event was delivered to the webhook.
    const createdEvents = [...after.values()].filter((text) => text.includes('"type":"plant.created"'));
    await eventually(
      async () => (hook.events.size >= createdEvents.length ? true : undefined),
      () => `every plant.created delivered (${hook.events.size} of ${createdEvents.length})`,
      120_000,
    );
    for (const id of load.created.keys()) {
      assert.ok(
        [...hook.events.values()].some((body) => body.includes(`"id":${id},`)),
        `the create of ${id} was delivered`,
      );
    }
  },
);
