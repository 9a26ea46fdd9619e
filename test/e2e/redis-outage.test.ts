import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { stoppableRedis } from '../support/redis.js';

// A Redis of this test's own (REDIS_URL, the shared rate limits) stopped and started again under a
// running server: one plain warning when it goes, one line when it is back (docs/operations.md).

const UNREACHABLE = 'Redis is unreachable: rate limits are not enforced until it returns';
const BACK = 'Redis is reachable again';

test('Redis stopped and started again: one plain warning with a reason, then one line saying it is back', async (t) => {
  const redis = await stoppableRedis();
  t.after(() => redis.stop());
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-redis-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const server = await startServer({ DATABASE_URL: `sqlite:${join(dir, 'store.db')}`, REDIS_URL: redis.url });
  t.after(() => server.stop());
  const lines = (msg: string): Array<Record<string, unknown>> =>
    server
      .logs()
      .split('\n')
      .filter((line) => line.includes(`"msg":"${msg}"`))
      .map((line) => JSON.parse(line) as Record<string, unknown>);

  await redis.stop();
  const [warning] = await eventually(
    async () => (lines(UNREACHABLE).length > 0 ? lines(UNREACHABLE) : undefined),
    () => `the line saying Redis is unreachable: ${server.logs().slice(-2000)}`,
  );
  assert.equal(warning!.level, 40);
  // Refused, closed, or (a request in flight when it stopped, on a busy machine) a command timeout.
  assert.match(String(warning!.reason), /ECONNREFUSED|closed|connect|timed out/i, 'the reason is the error’s message');
  assert.equal(warning!.err, undefined, 'no error object');
  assert.ok(!JSON.stringify(warning).includes('    at '), `no stack: ${JSON.stringify(warning)}`);
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200, 'the server keeps serving');

  await redis.start();
  const [back] = await eventually(
    async () => (lines(BACK).length > 0 ? lines(BACK) : undefined),
    () => `the line saying Redis is reachable again: ${server.logs().slice(-2000)}`,
  );
  assert.equal(back!.level, 30);
  assert.equal(lines(UNREACHABLE).length, 1, 'one warning for the whole outage, however often the client retried');
  assert.equal(lines(BACK).length, 1);
  assert.equal(await server.stop(), 0);
});
