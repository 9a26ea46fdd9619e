import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type ServerProcess, mintCliToken, startServer, callServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { Receiver } from './webhook-receiver.js';

// Webhooks delivered by real `plant-store serve` processes to a receiver on 127.0.0.1,
// verified by the `standardwebhooks` package, on both engines.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-webhooks-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';
/** Short waits, so retries happen within a test: the count of attempts is what matters. */
const FAST_RETRIES = '0s,300ms,300ms,300ms,300ms,300ms,300ms,300ms';

type T = { after: (fn: () => unknown) => void };

async function database(engine: string, name: string): Promise<{ url: string; drop(): Promise<void> }> {
  if (engine === 'sqlite') return { url: `sqlite:${join(dir, `${name}.db`)}`, drop: async () => {} };
  return scratchSchema();
}

interface Setup {
  readonly env: NodeJS.ProcessEnv;
  readonly token: string;
  readonly servers: ServerProcess[];
}

async function setup(engine: string, t: T, name: string, instances = 1, extra: NodeJS.ProcessEnv = {}): Promise<Setup> {
  const db = await database(engine, name);
  const servers: ServerProcess[] = [];
  // One hook, in this order: the servers stop before their schema is dropped (node runs
  // after-hooks in the order they were registered, and a drop under a running dispatcher can
  // deadlock with it).
  t.after(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await db.drop();
  });
  const env = {
    DATABASE_URL: db.url,
    WEBHOOK_ALLOW_PRIVATE: '1',
    WEBHOOK_RETRY_SCHEDULE: FAST_RETRIES,
    RATE_LIMIT: 'off',
    ...extra,
  };
  const token = await mintCliToken(env, 'alice', SCOPES);
  for (let i = 0; i < instances; i++) servers.push(await startServer(env));
  return { env, token, servers };
}

async function subscribe(s: Setup, receiver: Receiver, events?: string[]): Promise<{ id: string; secret: string }> {
  const r = await callServer(
    s.servers[0]!,
    s.token,
    'POST',
    '/webhooks',
    JSON.stringify({ url: receiver.url, events }),
  );
  assert.equal(r.status, 201, r.text);
  const created = JSON.parse(r.text) as { id: string; secret: string };
  receiver.secret = created.secret;
  return created;
}

async function deliveries(s: Setup, webhookId: string) {
  const r = await callServer(s.servers[0]!, s.token, 'GET', `/webhooks/${webhookId}/deliveries?limit=1000`);
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text) as Array<{
    status: string;
    attempts: number;
    lastStatus: number | null;
    lastError: string | null;
  }>;
}

async function waitFor(what: string, check: () => Promise<boolean>): Promise<void> {
  await eventually(async () => ((await check()) ? true : undefined), what, 20_000);
}

for (const engine of ['sqlite', 'postgres']) {
  describe(`webhooks delivered by a real server (${engine})`, { timeout: 120_000 }, () => {
    test('every delivery verifies with the standardwebhooks package, and payloads are exact for ids beyond 2^53', async (t) => {
      const receiver = new Receiver();
      await receiver.start();
      t.after(() => receiver.stop());
      const s = await setup(engine, t, 'exact');
      await subscribe(s, receiver);
      const bodies = [
        '{"id":9223372036854775807,"name":"max \\"quoted\\" \\\\ fern","tag":"🌿"}',
        '{"id":-9223372036854775808,"name":"min"}',
        '{"id":9007199254740993,"name":"2^53 + 1"}',
      ];
      for (const body of bodies)
        assert.equal((await callServer(s.servers[0]!, s.token, 'POST', '/plants', body)).status, 200);
      assert.equal((await callServer(s.servers[0]!, s.token, 'DELETE', '/plants/9007199254740993')).status, 204);
      await receiver.until((r) => r.length >= 4);
      // Deliveries go out several at a time, so they may arrive in any order (order per plant is
      // not promised by this interface version): each event exactly once, its body exact.
      const byId = (a: unknown[], b: unknown[]): number => (a.join() < b.join() ? -1 : 1);
      const got = receiver.received.map((r) => [r.type, r.body]).sort(byId);
      assert.deepEqual(
        got,
        [
          ['plant.created', bodies[0]],
          ['plant.created', bodies[1]],
          ['plant.created', bodies[2]],
          ['plant.deleted', '{"id":9007199254740993}'],
        ].sort(byId),
      );
      assert.ok(
        receiver.received.every((r) => r.verified),
        'every signature verifies',
      );
      assert.ok(receiver.received.every((r) => /^evt_\d+$/.test(r.id)));
      assert.ok(receiver.received.every((r) => r.headers['content-type'] === 'application/json'));
      // An identical retry is answered 200 and adds no event, so no delivery.
      assert.equal((await callServer(s.servers[0]!, s.token, 'POST', '/plants', bodies[1])).status, 200);
      // The attempt is recorded once the receiver has answered: wait for the records, then check them.
      const hookId = (await subscribeList(s))[0]!;
      await waitFor('no delivery pending', async () =>
        (await deliveries(s, hookId)).every((d) => d.status !== 'pending'),
      );
      const listed = await deliveries(s, hookId);
      assert.equal(listed.length, 4);
      assert.ok(listed.every((d) => d.status === 'delivered' && d.attempts === 1 && d.lastStatus === 200));
    });

    test('a failed attempt is retried with the same webhook-id until it is accepted', async (t) => {
      const receiver = new Receiver((_request, attempt) => (attempt < 3 ? 500 : 200));
      await receiver.start();
      t.after(() => receiver.stop());
      const s = await setup(engine, t, 'retry');
      const hook = await subscribe(s, receiver);
      assert.equal((await callServer(s.servers[0]!, s.token, 'POST', '/plants', '{"id":1,"name":"fern"}')).status, 200);
      await receiver.until((r) => r.length >= 1);
      await waitFor('the delivery delivered', async () => (await deliveries(s, hook.id))[0]?.status === 'delivered');
      const [delivery] = await deliveries(s, hook.id);
      assert.equal(delivery!.attempts, 3);
      assert.equal(delivery!.lastStatus, 200);
      assert.equal(receiver.received.length, 1);
      assert.ok(receiver.received[0]!.verified);
    });

    test('410 disables the webhook at once; enable makes it active again', async (t) => {
      const receiver = new Receiver(() => 410);
      await receiver.start();
      t.after(() => receiver.stop());
      const s = await setup(engine, t, 'gone');
      const hook = await subscribe(s, receiver);
      assert.equal((await callServer(s.servers[0]!, s.token, 'POST', '/plants', '{"id":1,"name":"fern"}')).status, 200);
      const status = async () => {
        const list = JSON.parse((await callServer(s.servers[0]!, s.token, 'GET', '/webhooks')).text) as Array<{
          status: string;
        }>;
        return list[0]!.status;
      };
      await waitFor('the webhook disabled', async () => (await status()) === 'disabled');
      const [delivery] = await deliveries(s, hook.id);
      assert.equal(delivery!.status, 'failed');
      assert.equal(delivery!.attempts, 1);
      assert.equal(delivery!.lastStatus, 410);
      // Disabled: a new change gets no delivery.
      assert.equal((await callServer(s.servers[0]!, s.token, 'POST', '/plants', '{"id":2,"name":"moss"}')).status, 200);
      assert.equal((await deliveries(s, hook.id)).length, 1);
      receiver.respondWith(() => 200);
      assert.equal((await callServer(s.servers[0]!, s.token, 'POST', `/webhooks/${hook.id}/enable`)).status, 200);
      assert.equal(await status(), 'active');
      assert.equal((await callServer(s.servers[0]!, s.token, 'POST', '/plants', '{"id":3,"name":"ivy"}')).status, 200);
      await receiver.until((r) => r.some((x) => x.body === '{"id":3,"name":"ivy"}'));
    });

    test('a receiver that is down for a while gets the whole backlog when it returns', async (t) => {
      const receiver = new Receiver();
      await receiver.start();
      t.after(() => receiver.stop());
      const s = await setup(engine, t, 'backlog');
      const hook = await subscribe(s, receiver);
      await receiver.stop(); // its port now refuses connections
      const count = 30;
      for (let i = 1; i <= count; i++) {
        assert.equal(
          (await callServer(s.servers[0]!, s.token, 'POST', '/plants', `{"id":${i},"name":"p${i}"}`)).status,
          200,
        );
      }
      await waitFor('an attempt refused a connection', async () =>
        (await deliveries(s, hook.id)).some((d) => d.lastError === 'connection refused'),
      );
      await receiver.start(); // back on the same port
      await receiver.until((r) => new Set(r.map((x) => x.id)).size >= count);
      const { bodies } = receiver.byId();
      assert.deepEqual(
        [...bodies.values()].map((r) => r.body).sort(),
        Array.from({ length: count }, (_, i) => `{"id":${i + 1},"name":"p${i + 1}"}`).sort(),
      );
      assert.ok(receiver.received.every((r) => r.verified));
    });
  });
}

async function subscribeList(s: Setup): Promise<string[]> {
  const list = JSON.parse((await callServer(s.servers[0]!, s.token, 'GET', '/webhooks')).text) as Array<{ id: string }>;
  return list.map((w) => w.id);
}

test(
  'two instances on one PostgreSQL database deliver every event, none in flight twice at once',
  { timeout: 120_000 },
  async (t) => {
    // Each delivery is held for a while, so that two dispatchers leasing the same one would overlap.
    const receiver = new Receiver(() => new Promise((resolve) => setTimeout(() => resolve(200), 20)));
    await receiver.start();
    t.after(() => receiver.stop());
    const s = await setup('postgres', t, 'two', 2);
    await subscribe(s, receiver);
    const count = 200;
    await Promise.all(
      Array.from({ length: count }, (_, i) =>
        callServer(s.servers[i % 2]!, s.token, 'POST', '/plants', `{"id":${i + 1},"name":"p${i + 1}"}`).then((r) =>
          assert.equal(r.status, 200),
        ),
      ),
    );
    await receiver.until((r) => new Set(r.map((x) => x.id)).size >= count, 60_000);
    const { bodies, duplicates } = receiver.byId();
    assert.equal(bodies.size, count);
    assert.equal(receiver.maxConcurrentPerId, 1, 'no delivery was in flight in two places at once');
    t.diagnostic(`${count} events, ${duplicates} delivered more than once`);
    assert.equal(duplicates, 0);
  },
);
