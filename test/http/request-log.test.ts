import assert from 'node:assert/strict';
import { setImmediate as turnEnd } from 'node:timers/promises';
import { type TestContext, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../../src/app.js';
import { TokenService } from '../../src/auth/token.service.js';
import { testConfig } from '../../src/config.js';
import { requestLine } from '../../src/http/request-log.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { READ_WRITE } from '../helpers.js';

// The request log: one line per answered request, built by requestLine from the logger's own
// parts rather than by pino's info(); it must be the line info() would have written.

test("requestLine is byte for byte the line pino's info() writes, whatever the URL holds", () => {
  const written: string[] = [];
  const logger = pino({ timestamp: () => ',"time":0' }, { write: (line: string) => void written.push(line) });
  const child = logger.child({ reqId: 'id "with" \\ quotes' });
  const urls = [
    '/plants?limit=10',
    '/plants?tag="quoted"&x=\\',
    '/plants?tag=caf\u00e9\u{1f331}',
    '/\u0001\u001f\u007f',
    '',
  ];
  for (const url of urls) {
    for (const [method, status, ms] of [
      ['GET', 200, 0.42],
      ['DELETE', 404, 12],
      ['POST', 409, 1e-7],
    ] as const) {
      child.info({ method, url, status, ms }, 'request completed');
      assert.equal(requestLine(child, method, url, status, ms), written.pop(), `${method} ${url}`);
    }
  }
  // An authenticated request's line names the token's id and its subject, whatever the subject holds.
  for (const actor of [
    { tokenId: 'a1B2c3D4e5F6', subject: 'alice' },
    { tokenId: 'jwt:o"brien\\', subject: 'o"brien\\ caf\u00e9\u{1f331}' },
  ]) {
    child.info({ method: 'GET', url: '/plants', status: 200, ms: 1.5, ...actor }, 'request completed');
    assert.equal(requestLine(child, 'GET', '/plants', 200, 1.5, actor), written.pop(), actor.subject);
  }
});

/** An app over a fresh store at `level`, its log lines collected. */
async function loggingApp(
  t: TestContext,
  level: string,
): Promise<{ app: FastifyInstance; store: Store; lines: string[] }> {
  const store = openSqlite(':memory:');
  await store.migrate();
  const lines: string[] = [];
  const app = await buildApp({
    config: testConfig({ logLevel: level }),
    store,
    logStream: { write: (text: string) => lines.push(...text.split('\n').filter(Boolean)) },
  });
  t.after(async () => {
    await app.close();
    await store.close();
  });
  return { app, store, lines };
}

test('each answered request writes one line with its id, method, redacted URL, status, time and who made it', async (t) => {
  const { app, store, lines } = await loggingApp(t, 'info');
  const { token, id } = await new TokenService(store).create({ subject: 'alice', scopes: READ_WRITE });

  const listed = await app.inject({
    url: '/plants?limit=2',
    headers: { authorization: `Bearer ${token}`, 'x-request-id': 'trace-1' },
  });
  assert.equal(listed.statusCode, 200);
  const refused = await app.inject({ url: `/plants?access_token=${token}` });
  assert.equal(refused.statusCode, 401);
  await turnEnd();

  const completed = lines
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((l) => l.msg === 'request completed');
  assert.equal(completed.length, 2, lines.join('\n'));
  const [first, second] = completed;
  assert.deepEqual(
    { ...first, time: undefined, ms: undefined },
    {
      level: 30,
      time: undefined,
      pid: process.pid,
      hostname: first!.hostname,
      reqId: 'trace-1',
      method: 'GET',
      url: '/plants?limit=2',
      status: 200,
      ms: undefined,
      tokenId: id,
      subject: 'alice',
      msg: 'request completed',
    },
  );
  assert.equal(typeof first!.time, 'number');
  assert.equal(typeof first!.ms, 'number');
  assert.equal(second!.url, '/plants?access_token=[redacted]');
  assert.equal(second!.status, 401);
  assert.equal(second!.reqId, refused.headers['x-request-id']);
  assert.ok(!('tokenId' in second!) && !('subject' in second!), 'a refused request names no one');
  // What docs/operations.md ("Is a token still used?") tells an operator to search for.
  assert.ok(lines.some((line) => line.includes(`"tokenId":"${id}"`) && line.includes('request completed')));
  assert.ok(!lines.join('\n').includes(token), 'the token is in no line');
});

test('at LOG_LEVEL=warn no request line is written', async (t) => {
  const { app, lines } = await loggingApp(t, 'warn');
  assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
  await turnEnd();
  assert.deepEqual(lines, []);
});

/** JSON.parse that refuses an object with a key twice (a reader that keeps the last would hide one). */
function parseStrict(line: string): Record<string, unknown> {
  const keys = [...line.matchAll(/[{,]"((?:[^"\\]|\\.)*)":/g)];
  // Keys at the top level only: the log's nested objects (err) are checked by their own walk.
  const value = JSON.parse(line) as Record<string, unknown>;
  const topLevel = keys.map((m) => m[1]!).filter((key) => key in value);
  assert.equal(new Set(topLevel).size, Object.keys(value).length, `a key twice in: ${line}`);
  return value;
}

test('each refused request names who was refused and why, never the secret; no line has a key twice', async (t) => {
  const { app, store, lines } = await loggingApp(t, 'info');
  const tokens = new TokenService(store);
  const reader = await tokens.create({ subject: 'alice', scopes: ['plants:read'] });
  const revoked = await tokens.create({ subject: 'bob', scopes: ['plants:read'] });
  await tokens.revoke(revoked.id);
  // Issued a minute ago by the service's clock (SQLite keeps it), for a millisecond: expired now.
  const expired = await new TokenService(store, () => Date.now() - 60_000).create({
    subject: 'carol',
    scopes: ['plants:read'],
    expiresInMs: 1,
  });
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });

  const answers = [
    await app.inject({ url: '/plants' }),
    await app.inject({ url: '/plants', headers: auth('not-a-token') }),
    await app.inject({ url: '/plants', headers: auth(revoked.token) }),
    await app.inject({ url: '/plants', headers: auth(expired.token) }),
    await app.inject({ method: 'POST', url: '/plants', headers: auth(reader.token), payload: { id: 1, name: 'a' } }),
  ];
  assert.deepEqual(
    answers.map((a) => a.statusCode),
    [401, 401, 401, 401, 403],
  );
  await turnEnd();

  const parsed = lines.map(parseStrict);
  const rejected = parsed
    .filter((l) => l.msg === 'request rejected')
    .map(({ status, refused, tokenId, subject, scope }) => ({ status, refused, tokenId, subject, scope }));
  assert.deepEqual(rejected, [
    { status: 401, refused: 'no token', tokenId: undefined, subject: undefined, scope: undefined },
    { status: 401, refused: 'malformed', tokenId: undefined, subject: undefined, scope: undefined },
    { status: 401, refused: 'revoked', tokenId: revoked.id, subject: undefined, scope: undefined },
    { status: 401, refused: 'expired', tokenId: expired.id, subject: undefined, scope: undefined },
    { status: 403, refused: 'missing scope', tokenId: reader.id, subject: 'alice', scope: 'plants:write' },
  ]);
  // Its request line names who asked only once the token is accepted: the 403, not the 401s.
  const completed = parsed
    .filter((l) => l.msg === 'request completed')
    .map(({ status, tokenId, subject }) => ({ status, tokenId, subject }));
  assert.deepEqual(completed, [
    ...[1, 2, 3, 4].map(() => ({ status: 401, tokenId: undefined, subject: undefined })),
    { status: 403, tokenId: reader.id, subject: 'alice' },
  ]);
  const all = lines.join('\n');
  for (const secret of [reader.token, revoked.token, expired.token])
    assert.ok(!all.includes(secret), 'no secret logged');
});
