import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { openPostgres } from '../../src/store/postgres/store.js';
import { type ServerProcess, mintCliToken } from '../process.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { createListLoad, storedIds } from './create-list-load.js';
import { Follower } from './event-follower.js';
import { folderContents, twoBehindNginx } from './nginx-front.js';

// The repository's own nginx configuration (deploy/nginx.conf) in front of two
// instances on one database; the instances are restarted one by one under create/list load through
// nginx, and no request fails and no acknowledged write is lost. Debian's nginx-light; .ci/run
// installs it when missing. Everything listens on 127.0.0.1. nginx is started and stopped with the
// commands the configuration's header prints, in a folder that does not exist before, as on a
// reader's machine: a folder nginx needs that the printed commands do not make fails here.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-nginx-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a rolling restart of two instances behind deploy/nginx.conf: 0 failed requests, 0 lost writes', async (t) => {
  const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}` };
  const { nginx, url, instances, start } = await twoBehindNginx(t, dir, env);
  // What the header says nginx keeps in its folder, and nothing else.
  assert.deepEqual(folderContents(nginx), [
    'client_body_temp',
    'error.log',
    'fastcgi_temp',
    'nginx.pid',
    'proxy_temp',
    'scgi_temp',
    'uwsgi_temp',
  ]);

  const token = await mintCliToken(env, 'lb');
  const load = createListLoad(url, token, 'lb');
  /** Until each instance, as it runs now, has answered `creates` creates through nginx, and the load has had them acknowledged. */
  const served = (creates: number, why: string): Promise<true> =>
    eventually(
      async () =>
        Object.values(instances).every((s) => createsAnswered(s) >= creates) && load.acknowledged.size >= 2 * creates
          ? true
          : undefined,
      () =>
        `${why}: ${creates} creates answered by each instance (${Object.entries(instances)
          .map(([name, s]) => `${name}: ${createsAnswered(s)}`)
          .join(', ')}; ${load.acknowledged.size} acknowledged; failures: ${load.failures.slice(0, 3).join('; ')})`,
      30_000,
    );

  for (const name of ['a', 'b'] as const) {
    await served(25, `before ${name} restarts`); // the load reaches both
    assert.equal(await instances[name]!.stop(), 0, `instance ${name} drained and exited 0`);
    await start(name);
  }
  await served(25, 'after the restarts'); // the restarted ones serve too
  await load.stop();

  assert.deepEqual(
    load.failures,
    [],
    `failed requests: ${load.failures.slice(0, 5).join('; ')}\nnginx: ${nginx.errors()}`,
  );
  const stored = await storedIds(url, token, 'lb');
  assert.deepEqual(
    [...load.acknowledged].filter((id) => !stored.has(id)),
    [],
  );
});

/** The creates an instance has answered 200, by its request log. */
function createsAnswered(server: ServerProcess): number {
  return server.logs().match(/"method":"POST","url":"\/plants","status":200,/g)?.length ?? 0;
}

// On PostgreSQL, a rolling restart behind deploy/nginx.conf ended a standard
// EventSource client for good: its reconnect got 502 from nginx (a stream must outlive a deploy:
// docs/api.md#the-change-feed). Here every answer nginx gives, the client's and the creates', is
// checked, and so is nginx's error log: a request nginx found no instance for is a 502, which
// EventSource (WHATWG HTML §9.2.3) and a POST's sender take as final.
const ROLLING_RESTARTS = 5;

test(
  `PostgreSQL: an EventSource client follows GET /events through deploy/nginx.conf across ${ROLLING_RESTARTS} rolling restarts in a row; nginx answers no 502`,
  { timeout: 300_000 },
  async (t) => {
    const db = await scratchSchema();
    t.after(() => db.drop());
    const env = { DATABASE_URL: db.url };
    const token = await mintCliToken(env, 'follower');
    const { nginx, instances, start } = await twoBehindNginx(t, dir, env);
    const follower = new Follower(nginx.url, token);
    t.after(() => follower.close());
    await follower.opened();

    /** Every create's answer other than 200, or its error: nginx must have none. */
    const failures: string[] = [];
    let next = 1;
    /** Creates the next `count` plants through nginx, one at a time: one event each. */
    const create = async (count: number): Promise<void> => {
      for (const last = next + count; next < last; next++) {
        // A create that failed (it must not) is sent again, so the rest of the scenario still runs
        // and the failure is reported with everything else: an identical retry adds no event.
        for (let attempt = 1; ; attempt++) {
          try {
            const response = await fetch(`${nginx.url}/plants`, {
              method: 'POST',
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
              body: JSON.stringify({ id: next, name: `plant ${next}` }),
            });
            const text = await response.text();
            if (response.status === 200) break;
            failures.push(`POST plant ${next}: ${response.status} ${text.slice(0, 200)}`);
          } catch (error) {
            failures.push(`POST plant ${next}: ${(error as Error).message}`);
          }
          assert.ok(attempt < 20, `plant ${next} created: ${failures.slice(-3).join('; ')}`);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    };

    await create(10);
    await follower.received(10);
    // The header's procedure: SIGTERM one instance (plants are created through nginx meanwhile,
    // while it drains), start it again, wait for its /readyz 200, then the other. Five rolling
    // restarts in a row (the 502 was seen once, in one of several), the same client following
    // across all of them.
    for (let round = 1; round <= ROLLING_RESTARTS; round++) {
      for (const name of ['a', 'b'] as const) {
        const [code] = await Promise.all([instances[name]!.stop(), create(5)]);
        assert.equal(code, 0, `round ${round}: instance ${name} drained and exited 0`);
        await start(name);
        await create(5);
      }
    }
    const total = 10 + ROLLING_RESTARTS * 2 * 10;
    assert.equal(next, total + 1);
    await follower
      .received(total, 60_000)
      .catch((error: Error) => assert.fail(`${error.message}\nnginx: ${nginx.errors()}`));

    const why = `\nclient: ${follower.errors.join('; ')}\nnginx: ${nginx.errors()}`;
    assert.deepEqual(failures, [], `every create through nginx answered 200${why}`);
    // The client's first GET and every reconnect: 200 (a stream, or its end with a retry: hint).
    assert.ok(follower.statuses.length >= 1);
    assert.deepEqual(
      follower.statuses.filter((status) => status !== 200),
      [],
      `every GET /events answered 200 (${follower.statuses.join(',')})${why}`,
    );
    assert.equal(follower.readyState, 1, `the client still follows the feed (OPEN)${why}`);
    // Every event once, in order: the plants 1 … total, with the log's ids.
    assert.deepEqual(
      follower.data.map((data) => (JSON.parse(data) as { id: number }).id),
      Array.from({ length: total }, (_, i) => i + 1),
    );
    const store = openPostgres(db.url, { poolSize: 1 });
    try {
      const log = (await store.readEvents(0n, null, 1000)).map((event) => String(event.id));
      assert.deepEqual(follower.ids, log, 'the ids of the event log, each once, in order');
    } finally {
      await store.close();
    }
    // nginx found an instance for every request: the ones it could not connect to were stopped,
    // and it said so only as a refused connect() before trying the other.
    const complaints = nginx
      .log()
      .split('\n')
      .filter((line) => line.trim() !== '' && !/connect\(\) failed \(111: Connection refused\)/.test(line));
    assert.deepEqual(complaints, [], 'nginx logged nothing but refused connects');
  },
);

// The one way found here to make nginx answer 502 in a rolling restart is the
// procedure's: waiting for /readyz through nginx instead of the restarted instance's own. nginx
// asks the instance that runs, so the answer is 200 while the other does not listen yet, and
// stopping the one that runs then leaves nginx none. deploy/nginx.conf's header says so and prints
// the wait on the instance's own port.
test("a readiness wait through nginx says nothing of the restarted instance: deploy/nginx.conf's header waits on the instance's own port", async (t) => {
  const db = await scratchSchema();
  t.after(() => db.drop());
  // Instance a is "being restarted": not listening. Instance b runs.
  const { nginx, ports, instances } = await twoBehindNginx(t, dir, { DATABASE_URL: db.url }, { start: ['b'] });
  const b = instances.b!;
  const throughNginx = await fetch(`${nginx.url}/readyz`);
  assert.equal(throughNginx.status, 200, 'nginx answers /readyz 200 from b');
  await assert.rejects(fetch(`http://127.0.0.1:${ports.a}/readyz`), 'a does not listen: its own wait goes on');
  // Stopping b now, as that 200 would let an operator do, leaves nginx no instance: a 502.
  assert.equal(await b.stop(), 0);
  const none = await fetch(`${nginx.url}/plants`);
  assert.equal(none.status, 502);
  await none.arrayBuffer();
  // The header prints the wait on the instance's own port, and warns against asking nginx.
  const header = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');
  assert.match(header, /^# {5}until curl -fsS http:\/\/127\.0\.0\.1:8081\/readyz >\/dev\/null; do sleep 0\.2; done$/m);
  assert.match(header, /^# Never ask nginx \(port 8080\)/m);
});
