import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { callServer, mintCliToken, startServer, type ServerProcess } from '../process.js';
import { Receiver } from '../e2e/webhook-receiver.js';
import { eventually } from '../support/eventually.js';
import { type ReplicaPair, silentProxy, startReplicaPair } from './replica-pair.js';

// The faults of faults.test.ts, run on `plant-store serve` as users run it (a process of its own,
// over HTTP, webhooks delivered by its dispatcher to a receiver on 127.0.0.1): a webhook-id is
// never sent twice with different bodies across an asynchronous loss, and after a silent primary
// the service shuts down cleanly (exit 0, no grace period run out) whatever the old primary does.

const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';
const pairs: ReplicaPair[] = [];
after(async () => {
  for (const pair of pairs) await pair.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Answer {
  readonly id: number;
  /** 0: no HTTP answer at all (a transport error), counted as a failure like any other non-200. */
  readonly status: number;
  readonly text: string;
}

/** `count` loops creating plants over HTTP until stop(); every answer kept. */
function writers(server: ServerProcess, token: string, count: number) {
  const answers: Answer[] = [];
  let next = 1;
  let going = true;
  const loops = Array.from({ length: count }, async () => {
    while (going) {
      const id = next++;
      try {
        const answer = await callServer(server, token, 'POST', '/plants', `{"id":${id},"name":"plant ${id}"}`);
        answers.push({ id, status: answer.status, text: answer.text });
      } catch (error) {
        answers.push({ id, status: 0, text: String(error) });
      }
    }
  });
  return {
    answers,
    async stop(): Promise<void> {
      going = false;
      await Promise.all(loops);
    },
  };
}

test('asynchronous loss under serve: no webhook-id delivered with two different bodies; every event on the new primary delivered', async (t) => {
  const pair = await startReplicaPair();
  pairs.push(pair);
  const url = pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write');
  const env = { DATABASE_URL: url, RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1' };
  const server = await startServer(env);
  t.after(() => server.stop());
  const token = await mintCliToken(env, 'alice', SCOPES);
  const hook = new Receiver();
  await hook.start();
  t.after(() => hook.stop());
  const made = await callServer(server, token, 'POST', '/webhooks', JSON.stringify({ url: hook.url }));
  assert.equal(made.status, 201, made.text);
  hook.secret = (JSON.parse(made.text) as { secret: string }).secret;

  const load = writers(server, token, 2);
  await eventually(async () => (hook.received.length >= 50 ? true : undefined), 'deliveries under way', 30_000);
  await pair.stopReceiving(pair.standby); // what the primary acknowledges from here on is not on the standby
  await sleep(1500);
  await pair.stop(pair.primary, 'kill');
  await pair.promote(pair.standby);
  const before = load.answers.length;
  await sleep(4000);
  await load.stop();
  assert.ok(
    load.answers.slice(before).some((a) => a.status === 200),
    'writes went on on the promoted standby',
  );

  const events = (await pair.sql(pair.standby, 'SELECT id::text AS id, payload FROM events')).rows as Array<{
    id: string;
    payload: string;
  }>;
  await eventually(
    async () => {
      const delivered = new Set(hook.received.map((r) => r.id));
      return events.every((e) => delivered.has(`evt_${e.id}`)) ? true : undefined;
    },
    () => `every event on the new primary delivered (${hook.received.length} deliveries, ${events.length} events)`,
    60_000,
  );
  const bodies = new Map<string, Set<string>>();
  for (const r of hook.received) bodies.set(r.id, (bodies.get(r.id) ?? new Set()).add(r.body));
  const twice = [...bodies].filter(([, each]) => each.size > 1).map(([id]) => id);
  assert.deepEqual(twice, [], 'a webhook-id delivered with two different bodies');
  assert.deepEqual(
    hook.received.filter((r) => !r.verified).map((r) => r.id),
    [],
    'every delivery verifies with the webhook secret',
  );
  const acknowledged = load.answers.filter((a) => a.status === 200).length;
  t.diagnostic(
    `${acknowledged} creates acknowledged, ${load.answers.length - acknowledged} not (503 or no answer, ` +
      `around the failover); ${hook.received.length} deliveries of ${bodies.size} webhook-ids, ${events.length} events on the new primary`,
  );
});

test('after a silent primary and its promoted standby, SIGTERM ends serve cleanly: exit 0, "stopped cleanly", no grace period run out', async (t) => {
  const pair = await startReplicaPair({ synchronous: true });
  pairs.push(pair);
  const proxy = await silentProxy(pair.primary.port);
  t.after(() => proxy.close());
  const url = `postgres://postgres@127.0.0.1:${proxy.port},127.0.0.1:${pair.standby.port}/postgres?target_session_attrs=read-write`;
  // The shipped defaults: DATABASE_FAILOVER_WAIT 10 s, SHUTDOWN_GRACE 10 s.
  const env = { DATABASE_URL: url, RATE_LIMIT: 'off', SHUTDOWN_GRACE: '10s' };
  const server = await startServer(env);
  const token = await mintCliToken(env, 'alice', SCOPES);
  const stream = await fetch(`${server.url}/events`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
  });
  assert.equal(stream.status, 200);
  const load = writers(server, token, 4);
  await sleep(1500);
  proxy.vanish();
  await sleep(3000);
  await pair.promote(pair.standby);
  await sleep(5000);
  await load.stop();
  const failed = load.answers.filter((a) => a.status !== 200);
  assert.deepEqual(
    failed.map((a) => `${a.id}: ${a.status} ${a.text}`),
    [],
    'no create refused while a writable primary was reachable',
  );

  const code = await server.stop();
  await stream.body?.cancel().catch(() => {});
  const lines = server
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => (JSON.parse(line) as { msg: string }).msg);
  assert.equal(code, 0, lines.slice(-10).join('\n'));
  assert.ok(lines.includes('stopped cleanly'), lines.slice(-10).join('\n'));
  assert.ok(!lines.includes('shutdown grace period over; exiting'), lines.slice(-10).join('\n'));
  const stopping = lines.slice(lines.indexOf('shutting down: finishing in-flight requests and open connections'));
  assert.deepEqual(
    stopping.filter((msg) => msg.includes('a database connection failed')),
    [],
    'a clean stop closes its connections on purpose: no failure is reported',
  );
  t.diagnostic(`${load.answers.length} creates, all 200`);
});

test('serve writes to the promoted standby, which stops; its old primary comes back unrewound: refused with a warn line, the metric, /readyz 503, writes 503', async () => {
  const pair = await startReplicaPair({ synchronous: true });
  pairs.push(pair);
  const url = pair.url([pair.primary, pair.standby], 'target_session_attrs=read-write');
  const env = { DATABASE_URL: url, RATE_LIMIT: 'off', DATABASE_FAILOVER_WAIT: '2s' };
  const server = await startServer(env);
  try {
    const token = await mintCliToken(env, 'alice', SCOPES);
    assert.equal((await callServer(server, token, 'POST', '/plants', '{"id":1,"name":"Fern"}')).status, 200);
    await pair.stop(pair.primary, 'kill');
    await pair.promote(pair.standby);
    let moved = await callServer(server, token, 'POST', '/plants', '{"id":2,"name":"Moss"}');
    for (let i = 0; moved.status !== 200 && i < 20; i++) {
      moved = await callServer(server, token, 'POST', '/plants', '{"id":2,"name":"Moss"}');
    }
    assert.equal(moved.status, 200, moved.text); // written on the new timeline
    await pair.stop(pair.standby, 'fast');
    await pair.restart(pair.primary); // writable, on the timeline its standby left

    const old = `127.0.0.1:${pair.primary.port}`;
    await eventually(
      async () =>
        (await fetch(`${server.url}/metrics`).then((r) => r.text())).includes(`host="${old}"`) ? true : undefined,
      'the metric names the refused server',
      30_000,
    );
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(`^plant_store_database_refused_hosts\\{host="${old}",reason="older_timeline"\\} 1$`, 'm'),
    );
    const ready = await fetch(`${server.url}/readyz`);
    assert.equal(ready.status, 503, 'nothing else qualifies');
    const write = await callServer(server, token, 'POST', '/plants', '{"id":3,"name":"Ivy"}');
    assert.equal(write.status, 503, write.text);
    assert.ok(write.headers.get('retry-after'), 'with Retry-After');
    const warned = server
      .logs()
      .split('\n')
      .filter((line) => line.includes('database: refusing'))
      .map((line) => JSON.parse(line) as { level: number; msg: string; reason: string });
    assert.equal(warned.length, 1, JSON.stringify(warned));
    assert.equal(warned[0]!.level, 40);
    assert.match(warned[0]!.msg, new RegExp(`^database: refusing ${old}: its timeline 1 is older than timeline 2`));
    const rows = (await pair.sql(pair.primary, 'SELECT id::int AS id FROM plants ORDER BY id')).rows;
    assert.deepEqual(rows, [{ id: 1 }], 'nothing written to the old primary');
  } finally {
    await server.stop();
  }
});
