import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { TokenService } from '../../src/auth/token.service.js';
import { mintToken } from '../../src/auth/token.js';
import { UnknownTokenBudget, clientKey } from '../../src/auth/unknown-token-budget.js';
import { testConfig } from '../../src/config.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { underTest } from '../support/engines.js';
import { openScratchPostgres, stopSharedPostgres } from '../support/postgres.js';

// Unauthenticated load stays away from the database: anyone can make a token whose checksum
// passes, so a flood of unknown tokens from one client reaches the token store a bounded number
// of times (a bucket of 100 lookups per client, refilled at 20 a second), then is answered 429
// with Retry-After; the tokens real clients use are never evicted and keep answering 200.

after(stopSharedPostgres);

const ENGINES: ReadonlyArray<[string, () => Promise<Store>]> = [
  ['sqlite', () => Promise.resolve(openSqlite(':memory:'))],
  ['postgres', openScratchPostgres],
];

/** `store` with the ids of its token lookups kept: what reaches the database. */
function counting(store: Store): { store: Store; lookups: string[] } {
  const lookups: string[] = [];
  const counted = new Proxy(store, {
    get(target, name) {
      if (name === 'findToken') {
        return (id: string) => {
          lookups.push(id);
          return target.findToken(id);
        };
      }
      const value = Reflect.get(target, name, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: counted, lookups };
}

const FLOODER = '203.0.113.9';
const REAL = '198.51.100.7';

for (const [engine, open] of underTest(ENGINES)) {
  test(`${engine}: 3,000 forged tokens from one address: at most 100 + 20/s lookups, then 429 with Retry-After; a real client answered 200 throughout`, async (t) => {
    const real = await open();
    t.after(() => real.close());
    await real.migrate();
    const { store, lookups } = counting(real);
    let now = Date.parse('2026-12-06T12:00:00Z');
    const clock = () => now;
    const app = await buildApp({
      config: testConfig({ rateLimit: null }),
      store,
      clock,
      logStream: { write: () => {} },
    });
    t.after(() => app.close());
    const service = new TokenService(real, clock);
    const aliceMade = await service.create({ subject: 'alice', scopes: ['plants:read'] });
    const bobMade = await service.create({ subject: 'bob', scopes: ['plants:read'] }); // used from the flooding address
    const [alice, bob] = [aliceMade.token, bobMade.token];
    const realIds = new Set([aliceMade.id, bobMade.id]);
    const get = (token: string, remoteAddress: string) =>
      app.inject({ method: 'GET', url: '/plants', remoteAddress, headers: { authorization: `Bearer ${token}` } });
    assert.equal((await get(alice, REAL)).statusCode, 200);
    assert.equal((await get(bob, FLOODER)).statusCode, 200);

    const start = now;
    const before = lookups.length;
    const statuses = new Map<number, number>();
    let retryAfter: string | undefined;
    let body: unknown;
    const realAnswers: number[] = [];
    for (let i = 0; i < 3000; i++) {
      now += 5; // 15 s of flood in all: the entries of alice's and bob's tokens go stale and are fetched again
      const answer = await get(mintToken().token, FLOODER);
      statuses.set(answer.statusCode, (statuses.get(answer.statusCode) ?? 0) + 1);
      if (answer.statusCode === 429) {
        retryAfter = answer.headers['retry-after'];
        body = answer.json();
      }
      if (i % 50 === 0) {
        realAnswers.push((await get(alice, REAL)).statusCode, (await get(bob, FLOODER)).statusCode);
      }
    }
    const seconds = (now - start) / 1000;
    const forgedLookups = lookups.slice(before).filter((id) => !realIds.has(id)).length;
    assert.ok(
      forgedLookups <= 100 + 20 * seconds,
      `${forgedLookups} lookups for 3,000 forged tokens in ${seconds} s (bound ${100 + 20 * seconds})`,
    );
    assert.deepEqual([...statuses.keys()].sort(), [401, 429], 'forged tokens: 401 while the budget lasts, then 429');
    assert.ok(Number(retryAfter) >= 1, `Retry-After ${retryAfter}`);
    assert.deepEqual(body, { error: 429, message: 'too many unknown bearer tokens from this address; retry later' });
    assert.deepEqual(
      realAnswers.filter((status) => status !== 200),
      [],
      'the real tokens, from another address and from the flooding one',
    );
    t.diagnostic(
      `${forgedLookups} lookups for 3,000 forged tokens over ${seconds} s of clock; ${statuses.get(401)} answered 401, ` +
        `${statuses.get(429)} 429; ${realAnswers.length} real requests, all 200`,
    );
  });
}

test('the budget: 100 at once per client, refilled at 20 a second, a lookup that finds a token given back', () => {
  let now = 0;
  const budget = new UnknownTokenBudget(() => now);
  for (let i = 0; i < 100; i++) assert.equal(budget.take('192.0.2.1'), 0);
  assert.equal(budget.take('192.0.2.1'), 50, 'the next in 50 ms');
  assert.equal(budget.take('192.0.2.2'), 0, 'another client has its own');
  now += 50;
  assert.equal(budget.take('192.0.2.1'), 0);
  assert.ok(budget.take('192.0.2.1') > 0);
  budget.giveBack('192.0.2.1');
  assert.equal(budget.take('192.0.2.1'), 0, 'given back');
  for (let i = 0; i < 100; i++) assert.equal(budget.take('2001:db8:1:2::1'), 0);
  assert.ok(budget.take('2001:db8:1:2:ffff::9') > 0, 'one IPv6 /64 is one client');
  assert.equal(budget.take('2001:db8:1:3::1'), 0, 'the next /64 another');
});

test('clients: IPv4 as it is, IPv4-mapped IPv6 as IPv4, IPv6 as its /64', () => {
  assert.equal(clientKey('192.0.2.1'), '192.0.2.1');
  assert.equal(clientKey('::ffff:192.0.2.1'), '192.0.2.1');
  assert.equal(clientKey('2001:db8:0:1:2:3:4:5'), '2001:db8:0:1::/64');
  assert.equal(clientKey('2001:DB8::1'), '2001:db8:0:0::/64');
  assert.equal(clientKey('::1'), '0:0:0:0::/64');
  assert.equal(clientKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
});

test('a bounded number of clients remembered (10,000 by default), the least recently seen forgotten first', () => {
  const budget = new UnknownTokenBudget(() => 0, 1, 20, 3);
  assert.equal(budget.take('192.0.2.1'), 0);
  assert.ok(budget.take('192.0.2.1') > 0);
  budget.take('192.0.2.2');
  budget.take('192.0.2.3');
  budget.take('192.0.2.4'); // 192.0.2.1 forgotten
  assert.equal(budget.take('192.0.2.1'), 0, 'a forgotten client starts with a full bucket');
});

test('behind a proxy named in TRUST_PROXY the client is X-Forwarded-For’s; without it, the connection’s', async (t) => {
  const store = openSqlite(':memory:');
  t.after(() => store.close());
  await store.migrate();
  const clock = () => 0; // no refill: each client has its 100
  const flood = async (trustProxy: readonly string[] | null) => {
    const app = await buildApp({
      config: testConfig({ rateLimit: null, trustProxy }),
      store,
      clock,
      logStream: { write: () => {} },
    });
    t.after(() => app.close());
    const get = (forwardedFor: string) =>
      app.inject({
        method: 'GET',
        url: '/plants',
        remoteAddress: '127.0.0.1', // the proxy
        headers: { authorization: `Bearer ${mintToken().token}`, 'x-forwarded-for': forwardedFor },
      });
    for (let i = 0; i < 100; i++) assert.equal((await get(FLOODER)).statusCode, 401);
    assert.equal((await get(FLOODER)).statusCode, 429, 'the flooding client is out of lookups');
    return (await get(REAL)).statusCode;
  };
  assert.equal(await flood(['127.0.0.1']), 401, 'another client behind the trusted proxy still has its own');
  assert.equal(await flood(null), 429, 'X-Forwarded-For not trusted: every client of the proxy is one');
});
