import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { startThrowawayPostgres } from '../support/postgres.js';

// Always a throwaway server of its own: this test stops the database under a running service.

interface Seen {
  statuses: Map<number, number>;
  failures: string[];
}

/** Sends requests one after another until stopped; records every status, and anything that is not an answer. */
function traffic(url: string, token: string, seen: Seen): { stop: () => Promise<void> } {
  let running = true;
  const loop = (async () => {
    for (let i = 0; running && i < 20_000; i++) {
      try {
        const r = await fetch(`${url}/plants?limit=5`, { headers: { authorization: `Bearer ${token}` } });
        const body = await r.json();
        seen.statuses.set(r.status, (seen.statuses.get(r.status) ?? 0) + 1);
        if (r.status !== 200 && r.status !== 503) seen.failures.push(`${r.status} ${JSON.stringify(body)}`);
      } catch (error) {
        seen.failures.push(String(error));
      }
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

const until = <T>(what: string, seconds: number, probe: () => Promise<T | undefined>): Promise<T> =>
  eventually(probe, what, seconds * 1000);

test(
  'when PostgreSQL goes away the service answers 503, stays up, and recovers by itself',
  { timeout: 120_000 },
  async (t) => {
    const db = await startThrowawayPostgres();
    t.after(() => db.stop());
    const env = { DATABASE_URL: db.url };
    const token = await mintCliToken(env);
    const server = await startServer(env);
    t.after(() => server.stop());
    const auth = { authorization: `Bearer ${token}` };

    const created = await fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"id":1,"name":"fern"}',
    });
    assert.equal(created.status, 200);

    const seen: Seen = { statuses: new Map(), failures: [] };
    const load = traffic(server.url, token, seen);

    await db.pause();
    const refused = await until('a 503 while the database is down', 20, async () => {
      const r = await fetch(`${server.url}/plants`, { headers: auth });
      return r.status === 503 ? r : (await r.arrayBuffer(), undefined);
    });
    assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/);
    assert.deepEqual(await refused.json(), { error: 503, message: 'the database is unavailable; retry shortly' });
    const write = await fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"id":2,"name":"rose"}',
    });
    assert.equal(write.status, 503);
    assert.equal(((await write.json()) as { error: number }).error, 503);
    const notReady = await fetch(`${server.url}/readyz`);
    assert.equal(notReady.status, 503);
    assert.equal(((await notReady.json()) as { error: number }).error, 503);
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'the process is alive');

    await db.resume();
    const back = await until('a 200 once the database is back', 30, async () => {
      const r = await fetch(`${server.url}/plants`, { headers: auth });
      return r.status === 200 ? r : (await r.arrayBuffer(), undefined);
    });
    assert.deepEqual(await back.json(), [{ name: 'fern' }]);
    assert.equal((await fetch(`${server.url}/readyz`)).status, 200);

    await load.stop();
    assert.deepEqual(seen.failures, [], 'every answer under traffic was a 200 or a 503');
    assert.ok((seen.statuses.get(503) ?? 0) > 0 && (seen.statuses.get(200) ?? 0) > 0);

    // The log says when the database went away (once, with the reason, no stack) and
    // when it came back, with the count of requests refused meanwhile.
    const back503 = await until('the line saying the database is back', 10, () =>
      Promise.resolve(server.logs().includes('"msg":"the database is back"') || undefined),
    );
    assert.ok(back503);
    const lines = server
      .logs()
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const away = lines.filter(
      (l) => l.msg === 'the database is unavailable: requests that need it get 503 until it is back',
    );
    const returned = lines.filter((l) => l.msg === 'the database is back');
    assert.equal(away.length, 1, 'one line when it went away');
    assert.equal(returned.length, 1, 'one line when it came back');
    const reason = String(away[0]!.reason);
    assert.ok(reason.length > 0 && !/(.{8,}): \1/.test(reason), `the reason, not doubled: ${reason}`);
    const refusedMeanwhile = Number(returned[0]!.refused);
    assert.ok(refusedMeanwhile >= 2, `refused: ${refusedMeanwhile}`);
    const stacks = lines.filter((l) => l.err !== undefined || l.stack !== undefined);
    assert.deepEqual(
      stacks.map((l) => `${String(l.msg)}: ${JSON.stringify(l.err).slice(0, 300)}`),
      [],
      'no stack trace',
    );
    assert.equal(server.child.exitCode, null, 'the server never crashed');
    assert.equal(await server.stop(), 0);
  },
);
