import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Refusal, TokenAuthenticator } from '../../src/auth/authenticator.js';
import type { Principal } from '../../src/auth/principal.js';

const subjectOf = (answer: Principal | Refusal): string | undefined =>
  answer instanceof Refusal ? undefined : answer.subject;
import { TokenService } from '../../src/auth/token.service.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { openScratchPostgres, stopSharedPostgres } from '../support/postgres.js';
import { runsOn, underTest } from '../support/engines.js';

// Where two machines' clocks meet. `token revoke` and `token create` may run on a host
// whose clock is off; the servers must not trust it.

after(stopSharedPostgres);

const ENGINES: ReadonlyArray<[string, () => Promise<Store>]> = [
  ['sqlite', () => Promise.resolve(openSqlite(':memory:'))],
  ['postgres', openScratchPostgres],
];

/** The PostgreSQL-only tests below run where this run covers PostgreSQL. */
const onPostgres = { skip: !runsOn('postgres') && 'this run covers SQLite only' };

const MINUTE = 60_000;
/** A fresh lookup on every request: no cache hides what the store says. */
const NO_CACHE = 0;

for (const [engine, open] of underTest(ENGINES)) {
  test(`${engine}: a token revoked from a host whose clock is a minute ahead is refused at once`, async (t) => {
    const store = await open();
    t.after(() => store.close());
    await store.migrate();
    const server = new TokenAuthenticator(store, Date.now, NO_CACHE);
    const fastHost = new TokenService(store, () => Date.now() + MINUTE);
    const issued = await fastHost.create({ subject: 'alice', scopes: ['plants:read'] });
    assert.equal(subjectOf(await server.authenticate(issued.token)), 'alice');
    assert.equal(await fastHost.revoke(issued.id), true);
    assert.deepEqual(
      await server.authenticate(issued.token),
      new Refusal('revoked', issued.id),
      'revoked is revoked, whatever the clocks say',
    );
    // The token list says the same thing the servers do.
    const listed = (await store.listTokens({ after: null, subject: null, limit: 10 })).find((r) => r.id === issued.id);
    assert.notEqual(listed?.revokedAt, null);
  });
}

test(
  'postgres: a token created from a host whose clock is an hour behind keeps the lifetime asked for, on the database clock',
  onPostgres,
  async (t) => {
    const store = await openScratchPostgres();
    t.after(() => store.close());
    await store.migrate();
    const server = new TokenAuthenticator(store, Date.now, NO_CACHE);
    const slowHost = new TokenService(store, () => Date.now() - 60 * MINUTE);
    // 30 minutes from the slow host's "now" would be half an hour in the past on every other clock.
    const issued = await slowHost.create({ subject: 'alice', scopes: ['plants:read'], expiresInMs: 30 * MINUTE });
    assert.equal(subjectOf(await server.authenticate(issued.token)), 'alice');
    const record = await store.findToken(issued.id);
    assert.ok(record?.expiresAt && record.readAt !== undefined);
    assert.equal(record.expiresAt - record.createdAt, 30 * MINUTE);
    assert.ok(
      Math.abs(record.createdAt - record.readAt) < MINUTE,
      'created_at is the database clock, not the host one',
    );
  },
);

test('postgres: a server whose own clock is off judges expiry on the database clock', onPostgres, async (t) => {
  const store = await openScratchPostgres();
  t.after(() => store.close());
  await store.migrate();
  const issued = await new TokenService(store).create({
    subject: 'alice',
    scopes: ['plants:read'],
    expiresInMs: 10 * MINUTE,
  });
  // This server's clock is 20 minutes ahead: by its own clock the token is past expiry, by the database's it is not.
  const ahead = new TokenAuthenticator(store, () => Date.now() + 20 * MINUTE, NO_CACHE);
  assert.equal(subjectOf(await ahead.authenticate(issued.token)), 'alice');
  // And a token the database's clock says has expired is refused by a server whose clock lags.
  const expired = await new TokenService(store).create({ subject: 'bob', scopes: ['plants:read'], expiresInMs: 1 });
  await new Promise((resolve) => setTimeout(resolve, 20));
  const behind = new TokenAuthenticator(store, () => Date.now() - 20 * MINUTE, NO_CACHE);
  assert.deepEqual(await behind.authenticate(expired.token), new Refusal('expired', expired.id));
});
