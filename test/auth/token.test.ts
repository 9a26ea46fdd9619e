import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Refusal, TokenAuthenticator } from '../../src/auth/authenticator.js';
import type { Principal } from '../../src/auth/principal.js';

const subjectOf = (answer: Principal | Refusal): string | undefined =>
  answer instanceof Refusal ? undefined : answer.subject;
import { TokenService } from '../../src/auth/token.service.js';
import { TOKEN_PREFIX, hashToken, mintToken, parseToken } from '../../src/auth/token.js';
import { openSqlite } from '../../src/store/sqlite/store.js';

test('a minted token has the prefix, its id, and a checksum that parseToken accepts', () => {
  const { id, token } = mintToken();
  assert.match(token, /^pst_[0-9A-Za-z]{50}$/);
  assert.ok(token.startsWith(`${TOKEN_PREFIX}${id}`));
  assert.equal(parseToken(token), id);
});

test('a token with one character changed fails its checksum before any lookup', () => {
  const { token } = mintToken();
  const i = 20;
  const changed = token.slice(0, i) + (token[i] === 'a' ? 'b' : 'a') + token.slice(i + 1);
  assert.equal(parseToken(changed), undefined);
  assert.equal(parseToken(token.slice(0, -1)), undefined);
  assert.equal(parseToken(`xyz_${token.slice(4)}`), undefined);
  assert.equal(parseToken(''), undefined);
});

test('tokens are random: a thousand mints give a thousand ids and secrets', () => {
  const minted = Array.from({ length: 1000 }, () => mintToken());
  assert.equal(new Set(minted.map((m) => m.id)).size, 1000);
  assert.equal(new Set(minted.map((m) => m.token)).size, 1000);
});

test('the store keeps only the SHA-256 of a token, never the secret', async (t) => {
  const store = openSqlite(':memory:');
  t.after(() => store.close());
  await store.migrate();
  const issued = await new TokenService(store).create({ subject: 'alice', scopes: ['plants:read'] });
  const record = await store.findToken(issued.id);
  assert.deepEqual(record?.secretHash, hashToken(issued.token));
  assert.equal(record?.secretHash.length, 32);
  assert.ok(!JSON.stringify(record).includes(issued.token.slice(TOKEN_PREFIX.length + 12)));
});

test('token creation refuses unknown scopes, no scopes, and bad subjects', async (t) => {
  const store = openSqlite(':memory:');
  t.after(() => store.close());
  await store.migrate();
  const tokens = new TokenService(store);
  await assert.rejects(tokens.create({ subject: 'alice', scopes: ['plants:delete'] }), /unknown: plants:delete/);
  await assert.rejects(tokens.create({ subject: 'alice', scopes: [] }), /scopes/);
  await assert.rejects(tokens.create({ subject: '', scopes: ['plants:read'] }), /subject/);
  await assert.rejects(tokens.create({ subject: 'a\nb', scopes: ['plants:read'] }), /subject/);
  await assert.rejects(tokens.create({ subject: 'x'.repeat(201), scopes: ['plants:read'] }), /subject/);
});

test('the authenticator sees a revocation once its cache entry is older than the cache time', async (t) => {
  const store = openSqlite(':memory:');
  t.after(() => store.close());
  await store.migrate();
  let now = 1_000_000;
  const tokens = new TokenService(store, () => now);
  const authenticator = new TokenAuthenticator(store, () => now, 2000);
  const issued = await tokens.create({ subject: 'alice', scopes: ['plants:read'] });
  assert.equal(subjectOf(await authenticator.authenticate(issued.token)), 'alice');
  await tokens.revoke(issued.id);
  now += 1999;
  assert.equal(subjectOf(await authenticator.authenticate(issued.token)), 'alice', 'still cached');
  now += 1;
  assert.ok((await authenticator.authenticate(issued.token)) instanceof Refusal);
});

test('the authenticator refuses an expired token at its expiry instant', async (t) => {
  const store = openSqlite(':memory:');
  t.after(() => store.close());
  await store.migrate();
  let now = 5_000;
  const issued = await new TokenService(store, () => now).create({
    subject: 'alice',
    scopes: ['plants:read'],
    expiresInMs: 1000,
  });
  const authenticator = new TokenAuthenticator(store, () => now, 2000);
  now = 5_999;
  assert.equal(subjectOf(await authenticator.authenticate(issued.token)), 'alice');
  now = 6_000;
  assert.ok((await authenticator.authenticate(issued.token)) instanceof Refusal);
});

test('a well-formed token whose secret does not match the stored hash is refused', async (t) => {
  const store = openSqlite(':memory:');
  t.after(() => store.close());
  await store.migrate();
  const presented = mintToken();
  // The store holds a token with the same id but another secret's hash.
  await store.createToken({
    id: presented.id,
    secretHash: hashToken(mintToken().token),
    subject: 'alice',
    scopes: ['plants:read'],
    createdAt: 0,
    expiresAt: null,
    revokedAt: null,
  });
  assert.equal(parseToken(presented.token), presented.id, 'the checksum is fine');
  const authenticator = new TokenAuthenticator(store, Date.now, 2000);
  assert.ok((await authenticator.authenticate(presented.token)) instanceof Refusal);
});
