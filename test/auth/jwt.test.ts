import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type JWK, type JWTPayload, SignJWT, exportJWK, generateKeyPair } from 'jose';
import type { JwtSettings } from '../../src/config.js';
import { type TestApp, READ_WRITE, json, makeApp } from '../helpers.js';
import { assertErrorBody, listen } from '../http/support.js';
import { RawStream, eventually } from '../events/stream-support.js';

// OpenID Connect access tokens, verified against a JWKS served by a real local HTTP server.

const ISSUER = 'https://id.example.test/';
const AUDIENCE = 'plant-store';
const INVALID_TOKEN = 'Bearer realm="plant-store", error="invalid_token"';

type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
let provider: KeyPair;
let stranger: KeyPair;
let jwks: { keys: JWK[] };
let status = 200;
let server: Server;
let url: string;

before(async () => {
  provider = await generateKeyPair('RS256');
  stranger = await generateKeyPair('RS256');
  jwks = { keys: [{ ...(await exportJWK(provider.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] };
  server = createServer((_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
});
after(() => server.close());

const settings = (jwksUrl: string): JwtSettings => ({
  jwksUrl,
  issuer: ISSUER,
  audience: AUDIENCE,
  algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
});

const now = (): number => Math.floor(Date.now() / 1000);

/** A token signed by `key` (the provider's by default), valid for 5 minutes unless claims say otherwise. */
async function mint(claims: JWTPayload = {}, key: KeyPair = provider, header = { alg: 'RS256', kid: 'k1' }) {
  const standard = { iss: ISSUER, aud: AUDIENCE, sub: 'oidc-user', iat: now(), exp: now() + 300 };
  return new SignJWT({ scope: 'plants:read plants:write', ...standard, ...claims })
    .setProtectedHeader(header)
    .sign(key.privateKey);
}

const b64 = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('JWTs from an OpenID Connect provider (JWT_JWKS_URL)', () => {
  let h: TestApp;
  before(async () => {
    h = await makeApp({ jwt: settings(url) });
  });
  after(() => h.close());

  test('a valid JWT authenticates its sub, with the scopes of its scope claim', async () => {
    const token = await mint();
    const created = await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"oidc fern"}') });
    assert.equal(created.statusCode, 200, created.body);
    assert.deepEqual(created.json(), { name: 'oidc fern' });
    const listed = await h.call(token, { method: 'GET', url: '/plants' });
    assert.equal(listed.statusCode, 200);
    assert.deepEqual(listed.json(), [{ name: 'oidc fern' }]);
    // sub is the owner, in the same namespace as API tokens' subjects.
    const apiToken = await h.token('oidc-user', READ_WRITE);
    assert.deepEqual((await h.call(apiToken, { method: 'GET', url: '/plants' })).json(), [{ name: 'oidc fern' }]);
    const other = await h.token('someone-else', READ_WRITE);
    assert.deepEqual((await h.call(other, { method: 'GET', url: '/plants' })).json(), []);
  });

  test('a scope the token lacks is 403 insufficient_scope; unknown scopes are ignored', async () => {
    const token = await mint({ scope: 'plants:read openid profile' });
    assert.equal((await h.call(token, { method: 'GET', url: '/plants' })).statusCode, 200);
    const response = await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":2,"name":"x"}') });
    assertErrorBody(response, 403);
    assert.equal(
      response.headers['www-authenticate'],
      'Bearer realm="plant-store", error="insufficient_scope", scope="plants:write"',
    );
  });

  test('exp and nbf are checked with 30 s of clock skew', async () => {
    const ok = async (claims: JWTPayload): Promise<number> =>
      (await h.call(await mint(claims), { method: 'GET', url: '/plants' })).statusCode;
    assert.equal(await ok({ exp: now() - 10 }), 200, 'expired 10 s ago: within the skew');
    assert.equal(await ok({ exp: now() - 60 }), 401, 'expired a minute ago');
    assert.equal(await ok({ nbf: now() + 10 }), 200, 'valid in 10 s: within the skew');
    assert.equal(await ok({ nbf: now() + 120 }), 401, 'valid only in two minutes');
  });

  const refused: Array<[string, () => Promise<string>]> = [
    ['signed by a key the provider did not publish', () => mint({}, stranger)],
    ['a wrong audience', () => mint({ aud: 'another-api' })],
    ['a wrong issuer', () => mint({ iss: 'https://evil.example.test/' })],
    ['expired', () => mint({ exp: now() - 3600 })],
    [
      'alg none (unsigned)',
      () =>
        Promise.resolve(
          `${b64({ alg: 'none' })}.${b64({ sub: 'oidc-user', iss: ISSUER, aud: AUDIENCE, exp: now() + 300, scope: 'plants:read' })}.`,
        ),
    ],
    [
      'HS256 with the public key as the secret (algorithm confusion)',
      async () => {
        const secret = new TextEncoder().encode(JSON.stringify(jwks.keys[0]));
        return new SignJWT({ scope: 'plants:read' })
          .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject('oidc-user')
          .setExpirationTime(now() + 300)
          .sign(secret);
      },
    ],
    [
      'a tampered payload',
      async () => {
        const [head, , signature] = (await mint()).split('.');
        return `${head}.${b64({ sub: 'admin', iss: ISSUER, aud: AUDIENCE, exp: now() + 300, scope: 'plants:admin' })}.${signature}`;
      },
    ],
    ['not a JWT at all', () => Promise.resolve('eyJhbGciOi.not-a-jwt')],
  ];
  for (const [name, token] of refused) {
    test(`${name} → 401 invalid_token`, async () => {
      const response = await h.call(await token(), { method: 'GET', url: '/plants' });
      assertErrorBody(response, 401);
      assert.equal(response.headers['www-authenticate'], INVALID_TOKEN);
    });
  }

  test('a token without sub or exp → 401 invalid_token', async () => {
    const build = (exp: boolean, sub: boolean) => {
      let jwt = new SignJWT({ scope: 'plants:read' })
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(ISSUER)
        .setAudience(AUDIENCE);
      if (exp) jwt = jwt.setExpirationTime(now() + 300);
      if (sub) jwt = jwt.setSubject('oidc-user');
      return jwt.sign(provider.privateKey);
    };
    for (const token of [await build(false, true), await build(true, false)]) {
      const response = await h.call(token, { method: 'GET', url: '/plants' });
      assertErrorBody(response, 401);
    }
  });

  test('API tokens keep working beside JWTs', async () => {
    const token = await h.token('alice', READ_WRITE);
    assert.equal((await h.call(token, { method: 'GET', url: '/plants' })).statusCode, 200);
  });
});

describe('when the provider’s keys cannot be fetched', () => {
  test('an unreachable JWKS → 503 with Retry-After and the Error body', async (t) => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve)); // nothing listens there now
    const h = await makeApp({ jwt: settings(`http://127.0.0.1:${port}/jwks.json`) });
    t.after(() => h.close());
    const response = await h.call(await mint(), { method: 'GET', url: '/plants' });
    assertErrorBody(response, 503);
    assert.equal(response.headers['retry-after'], '5');
  });

  test('a JWKS endpoint answering 500 → 503', async (t) => {
    const h = await makeApp({ jwt: settings(url) });
    t.after(() => {
      status = 200;
      return h.close();
    });
    status = 500;
    const response = await h.call(await mint(), { method: 'GET', url: '/plants' });
    assertErrorBody(response, 503);
  });
});

test('without JWT_JWKS_URL a JWT is just a malformed token: 401 invalid_token', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const response = await h.call(await mint(), { method: 'GET', url: '/plants' });
  assertErrorBody(response, 401);
  assert.equal(response.headers['www-authenticate'], INVALID_TOKEN);
});

test('during a key rotation a token without kid is checked against every published key', async (t) => {
  const second = await generateKeyPair('RS256');
  const saved = jwks.keys;
  jwks = {
    keys: [
      { ...(await exportJWK(second.publicKey)), kid: 'k2', alg: 'RS256', use: 'sig' },
      { ...saved[0]!, kid: 'k1' },
    ],
  };
  const h = await makeApp({ jwt: settings(url) });
  t.after(async () => {
    jwks = { keys: saved };
    await h.close();
  });
  const withoutKid = await mint({}, provider, { alg: 'RS256' } as { alg: string; kid: string });
  assert.equal((await h.call(withoutKid, { method: 'GET', url: '/plants' })).statusCode, 200);
  const bySecond = await mint({}, second, { alg: 'RS256' } as { alg: string; kid: string });
  assert.equal((await h.call(bySecond, { method: 'GET', url: '/plants' })).statusCode, 200);
  const byStranger = await mint({}, stranger, { alg: 'RS256' } as { alg: string; kid: string });
  assertErrorBody(await h.call(byStranger, { method: 'GET', url: '/plants' }), 401);
});

test('a sub that is not well-formed text (a lone surrogate) → 401', async (t) => {
  const h = await makeApp({ jwt: settings(url) });
  t.after(() => h.close());
  assertErrorBody(await h.call(await mint({ sub: '\ud800' }), { method: 'GET', url: '/plants' }), 401);
});

test('a GET /events stream of a JWT ends once the JWT is refused (exp, plus the 30 s of skew every request gets); reconnecting gets 401', async (t) => {
  const h = await makeApp({ jwt: settings(url) });
  const port = await listen(h);
  const streams: RawStream[] = [];
  t.after(async () => {
    for (const stream of streams) stream.destroy();
    await h.close();
  });
  // Past its exp, still inside the skew allowed: accepted for about 6 s more.
  const token = await mint({ exp: now() - 24 });
  const stream = new RawStream(port, token);
  streams.push(stream);
  await eventually('the stream opens', () => stream.text.includes(': connected'));
  assert.equal(stream.status, 200);
  await eventually('the stream ends once the JWT is refused', () => stream.ended, 20_000);
  assert.match(stream.text, /revoked or has expired/);
  const again = new RawStream(port, token);
  streams.push(again);
  await eventually('the reconnect is answered', () => again.ended);
  assert.equal(again.status, 401);
});
