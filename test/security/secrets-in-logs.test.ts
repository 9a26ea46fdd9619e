import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, after, before, test } from 'node:test';
import { type JWTPayload, SignJWT, exportJWK, generateKeyPair } from 'jose';
import { mintToken } from '../../src/auth/token.js';
import { parseRaw, rawExchange } from '../http/support.js';
import { type CliResult, runCli, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';

// Issue: "a test reads the logs of a full run and finds no secret". The real process and the real
// CLI, through every kind of answer; then everything they wrote is searched for every credential
// that was issued or presented.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-secrets-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// An OpenID Connect provider's JWKS, so that JWTs (the other bearer credential) are in the run too.
const ISSUER = 'https://id.example.test/';
const AUDIENCE = 'plant-store';
type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;
let provider: KeyPair;
let stranger: KeyPair;
let jwksUrl: string;
let keys: object = {};
const jwks = createServer((_request, response) => void response.writeHead(200).end(JSON.stringify(keys)));
before(async () => {
  [provider, stranger] = await Promise.all([generateKeyPair('RS256'), generateKeyPair('RS256')]);
  keys = { keys: [{ ...(await exportJWK(provider.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }] };
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  jwksUrl = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/jwks.json`;
});
after(() => jwks.close());

function jwt(claims: JWTPayload = {}, key: KeyPair = provider): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: 'oidc-olga', scope: 'plants:read', exp: now + 300, ...claims })
    .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
    .sign(key.privateKey);
}

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const changeAt = (token: string, i: number): string =>
  token.slice(0, i) + ALPHABET[(ALPHABET.indexOf(token[i]!) + 1) % 62]! + token.slice(i + 1);

interface Issued {
  readonly id: string;
  readonly token: string;
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: string;
}

/** The places a credential must not show up in, named for the failure message. */
type Haystack = ReadonlyArray<readonly [where: string, text: string]>;

/** Fails naming the place and showing the offending line with the credential masked, never printing it. */
function assertAbsent(haystack: Haystack, needle: string, what: string): void {
  for (const [where, text] of haystack) {
    const at = text.indexOf(needle);
    if (at === -1) continue;
    const end = text.indexOf('\n', at);
    const line = text.slice(text.lastIndexOf('\n', at) + 1, end === -1 ? undefined : end);
    assert.fail(`${what} appears in ${where}: ${line.replaceAll(needle, '<credential>').slice(0, 500)}`);
  }
}

async function fullSession(t: TestContext, level: string): Promise<void> {
  const cwd = mkdtempSync(join(dir, `${level}-`));
  const env = {
    DATABASE_URL: `sqlite:${join(cwd, 'store.db')}`,
    LOG_LEVEL: level,
    RATE_LIMIT: '30/1m',
    JWT_JWKS_URL: jwksUrl,
    JWT_ISSUER: ISSUER,
    JWT_AUDIENCE: AUDIENCE,
  };
  // Every CLI output but the stdout of `token create`, whose job is to print the token.
  const cliOutputs: Array<[string, string]> = [];
  const cli = async (args: string[], printsToken = false): Promise<CliResult> => {
    const r = await runCli(args, env, cwd);
    assert.equal(r.code, 0, `plant-store ${args.join(' ')}: ${r.stderr}`);
    if (!printsToken) cliOutputs.push([`the stdout of plant-store ${args.join(' ')}`, r.stdout]);
    cliOutputs.push([`the stderr of plant-store ${args.join(' ')}`, r.stderr]);
    return r;
  };
  const mint = async (subject: string, scopes: string, ...flags: string[]): Promise<Issued> => {
    const r = await cli(['token', 'create', '--subject', subject, '--scopes', scopes, ...flags], true);
    if (flags.includes('--json')) return JSON.parse(r.stdout) as Issued;
    const token = r.stdout.trim();
    return { id: token.slice(4, 16), token };
  };

  const [alice, bob, reader, admin, victim, limited] = await Promise.all([
    mint('alice', 'plants:read,plants:write', '--json'),
    mint('bob', 'plants:read,plants:write'), // the plain form: the token alone on stdout
    mint('rita', 'plants:read', '--json', '--expires-in', '1h'),
    mint('root', 'plants:admin', '--json'),
    mint('vic', 'plants:read', '--json'),
    mint('lim', 'plants:read', '--json'),
  ]);
  // Credentials presented but never valid: each holds most of a real secret.
  const changed = changeAt(alice.token, 30);
  const truncated = alice.token.slice(0, -1);
  const unknown = mintToken().token;
  const basic = Buffer.from(`alice:${alice.token}`).toString('base64');
  const jwts = {
    valid: await jwt(),
    expired: await jwt({ exp: Math.floor(Date.now() / 1000) - 3600 }),
    forged: await jwt({ scope: 'plants:admin' }, stranger),
    writer: await jwt({ scope: 'plants:read plants:write' }),
  };

  const server = await startServer(env, cwd);
  t.after(() => server.stop());
  let serverStderr = '';
  server.child.stderr?.on('data', (chunk: Buffer) => void (serverStderr += chunk.toString()));
  const port = new URL(server.url).port;

  const call = async (
    authorization: string | undefined,
    method: string,
    path: string,
    body?: string,
    type = 'application/json',
  ): Promise<Answer> => {
    const headers: Record<string, string> = { 'x-request-id': `secrets-${level}` };
    if (authorization !== undefined) headers.authorization = authorization;
    if (body !== undefined) headers['content-type'] = type;
    const res = await fetch(`${server.url}${path}`, { method, headers, body });
    return { status: res.status, headers: res.headers, body: await res.text() };
  };
  const as = (who: Issued) => (method: string, path: string, body?: string, type?: string) =>
    call(`Bearer ${who.token}`, method, path, body, type);
  const expect = async (status: number, answer: Promise<Answer>, what: string): Promise<Answer> => {
    const res = await answer;
    assert.equal(res.status, status, `${what}: ${res.body.slice(0, 200)}`);
    return res;
  };

  // The ordinary work: creates, a safe retry, pages, deletes.
  for (const id of ['1', '2', '9007199254740993']) {
    await expect(200, as(alice)('POST', '/plants', `{"id":${id},"name":"fern ${id}","tag":"green"}`), 'create');
  }
  await expect(200, as(alice)('POST', '/plants', '{"id":1,"name":"fern 1","tag":"green"}'), 'safe retry');
  const first = await expect(200, as(alice)('GET', '/plants?limit=2'), 'first page');
  const next = /^<([^>]+)>; rel="next"$/.exec(first.headers.get('link') ?? '')?.[1];
  assert.ok(next, 'a next page');
  await expect(200, as(alice)('GET', next), 'next page');
  await expect(200, as(alice)('GET', '/plants?tag=green'), 'tag filter');
  await expect(200, as(admin)('GET', '/plants'), 'admin list');
  await expect(200, as(reader)('GET', '/plants'), 'reader list');
  await expect(204, as(alice)('DELETE', '/plants/2'), 'delete');
  await expect(200, call(`bearer ${bob.token}`, 'GET', '/plants'), 'lower-case scheme');
  await expect(200, call(`Bearer ${jwts.valid}`, 'GET', '/plants'), 'a JWT');
  await expect(200, call(`Bearer ${jwts.writer}`, 'POST', '/plants', '{"id":20,"name":"oidc fern"}'), 'a JWT');
  await expect(403, call(`Bearer ${jwts.valid}`, 'DELETE', '/plants/20'), 'a JWT without the scope');
  await expect(401, call(`Bearer ${jwts.expired}`, 'GET', '/plants'), 'an expired JWT');
  await expect(401, call(`Bearer ${jwts.forged}`, 'GET', '/plants'), 'a JWT signed by another key');

  // Every refusal.
  await expect(409, as(bob)('POST', '/plants', '{"id":1,"name":"mine"}'), '409');
  await expect(404, as(bob)('DELETE', '/plants/1'), 'another user’s plant');
  await expect(404, as(alice)('DELETE', '/plants/12345'), 'missing plant');
  await expect(404, as(alice)('GET', '/nowhere'), 'unknown path');
  await expect(403, as(reader)('POST', '/plants', '{"id":7,"name":"x"}'), '403');
  await expect(403, as(reader)('DELETE', '/plants/1'), '403');
  await expect(405, as(alice)('PUT', '/plants'), '405');
  await expect(405, as(alice)('GET', '/plants/1'), '405');
  await expect(415, as(alice)('POST', '/plants', '{"id":8,"name":"x"}', 'text/plain'), '415');
  await expect(413, as(alice)('POST', '/plants', `{"id":9,"name":"${'x'.repeat(20_000)}"}`), '413');
  await expect(400, as(alice)('POST', '/plants', '{"id":9,'), 'malformed JSON');
  await expect(400, as(alice)('GET', '/plants?limit=0'), 'bad limit');
  await expect(400, as(alice)('GET', '/plants?cursor=nope'), 'bad cursor');
  await expect(400, as(alice)('DELETE', '/plants/abc'), 'bad id');
  await expect(401, call(undefined, 'GET', '/plants'), 'no token');
  for (const header of [
    `Bearer ${changed}`,
    `Bearer ${truncated}`,
    `Bearer ${unknown}`,
    `Bearer ${alice.token} ${bob.token}`,
    `Bearer ${alice.token}x`,
    `Token ${alice.token}`,
    `Basic ${basic}`,
    alice.token,
  ]) {
    await expect(401, call(header, 'POST', '/plants', '{"id":10,"name":"x"}'), 'malformed or unknown token');
  }

  // A token revoked through the CLI: refused once the server's cache lets go of it (within 5 s).
  await expect(200, as(victim)('GET', '/plants'), 'before the revocation');
  await cli(['token', 'revoke', victim.id]);
  await eventually(
    async () => ((await as(victim)('GET', '/plants')).status === 401 ? true : undefined),
    'the revoked token refused',
  );

  // The rate limit (30 a minute for this token).
  let limitedStatus = 0;
  for (let i = 0; i < 40 && limitedStatus !== 429; i++) limitedStatus = (await as(limited)('GET', '/plants')).status;
  assert.equal(limitedStatus, 429);

  // What only a raw socket can send: two Authorization headers, a bad request line, a bad
  // header line and oversized headers, each with a real token among the bytes.
  const raw = async (status: number, request: string): Promise<void> => {
    assert.equal(
      parseRaw(await rawExchange(t, Number(port), request)).status,
      status,
      JSON.stringify(request.slice(0, 40)),
    );
  };
  const auth = `Authorization: Bearer ${alice.token}\r\n`;
  await raw(
    400,
    `GET /plants HTTP/1.1\r\nHost: x\r\n${auth}Authorization: Bearer ${bob.token}\r\nConnection: close\r\n\r\n`,
  );
  await raw(400, `GET /plants HTTP/1.1 garbage\r\nHost: x\r\n${auth}\r\n`);
  await raw(400, `GET /plants HTTP/1.1\r\nHost: x\r\n${auth}this is not a header\r\n\r\n`);
  await raw(431, `GET /plants HTTP/1.1\r\nHost: x\r\n${auth}X-Big: ${'y'.repeat(20_000)}\r\n\r\n`);

  const listed = await cli(['token', 'list']);
  const listedJson = await cli(['token', 'list', '--json']);
  for (const { id } of [alice, bob, victim]) assert.match(listed.stdout + listedJson.stdout, new RegExp(id));

  assert.equal(await server.stop(), 0);
  const logs = server.logs();
  // The search has something to search: the run was logged, with its request ids.
  for (const expected of ['"status":409', '"status":401', '"status":429', '"status":413', 'client error']) {
    assert.ok(logs.includes(expected), `the logs hold ${expected}`);
  }
  assert.ok(logs.includes(`secrets-${level}`), 'the logs carry the request ids');
  if (level === 'trace') assert.ok(logs.includes('incoming request'), 'trace logs the incoming requests');

  const haystack: Haystack = [['the server’s stdout', logs], ['the server’s stderr', serverStderr], ...cliOutputs];
  const everything = haystack.map(([, text]) => text).join('\n');
  for (const [name, token] of Object.entries({ alice, bob, reader, admin, victim, limited })) {
    assertAbsent(haystack, token.token, `${name}’s token`);
    // Any 12 characters of the secret in a row would be a leak of part of it.
    for (let i = 16; i + 12 <= 48; i++) {
      assertAbsent(haystack, token.token.slice(i, i + 12), `part of ${name}’s secret`);
    }
    assertAbsent(haystack, createHash('sha256').update(token.token).digest('hex'), `the hash of ${name}’s token`);
  }
  for (const [name, credential] of Object.entries({ changed, truncated, unknown, basic })) {
    assertAbsent(haystack, credential, `the ${name} credential`);
  }
  for (const [name, token] of Object.entries(jwts)) {
    assertAbsent(haystack, token, `the ${name} JWT`);
    assertAbsent(haystack, token.split('.')[2]!, `the signature of the ${name} JWT`);
  }
  assert.doesNotMatch(everything, /bearer\s+pst_/i, 'no Bearer pst_');
  assert.doesNotMatch(everything, /bearer\s+eyJ/i, 'no Bearer JWT');
  assert.doesNotMatch(everything, /pst_[0-9A-Za-z]/, 'nothing that looks like a token');
}

for (const level of ['trace', 'info']) {
  test(`a full session at LOG_LEVEL=${level} leaves no token or secret in the server’s logs or the CLI’s outputs`, async (t) => {
    await fullSession(t, level);
  });
}

// Credentials where they do not belong: a token in the URL, a whole token given to `token revoke`.

test('a token sent in the URL query (RFC 6750 §2.3, which the service does not accept) is not written to the logs', async (t) => {
  const cwd = mkdtempSync(join(dir, 'query-'));
  const env = { DATABASE_URL: `sqlite:${join(cwd, 'store.db')}` };
  const token = await mintCliToken(env, 'alice', 'plants:read');
  const server = await startServer(env, cwd);
  t.after(() => server.stop());
  const res = await fetch(`${server.url}/plants?access_token=${token}`);
  assert.equal(res.status, 401);
  await res.arrayBuffer();
  const inPath = await fetch(`${server.url}/${token}?limit=1`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(inPath.status, 404);
  await inPath.arrayBuffer();
  assert.equal(await server.stop(), 0);
  assert.match(server.logs(), /"url":"\/plants\?access_token=\[redacted\]"/);
  assert.match(server.logs(), /"url":"\/\[redacted\]\?limit=1"/);
  assertAbsent([['the server’s stdout', server.logs()]], token.slice(16, 48), 'the secret');
});

test('token revoke given the whole token revokes it by its id, and does not print the token', async () => {
  const env = { DATABASE_URL: `sqlite:${join(mkdtempSync(join(dir, 'revoke-')), 'store.db')}` };
  const token = await mintCliToken(env, 'alice', 'plants:read');
  const r = await runCli(['token', 'revoke', token], env);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /^Revoked token [0-9A-Za-z]{12}\./m);
  const listed = await runCli(['token', 'list', '--json'], env);
  assert.equal((JSON.parse(listed.stdout) as Array<{ status: string }>)[0]?.status, 'revoked');
  const mistyped = `${token.slice(0, -1)}${token.endsWith('x') ? 'y' : 'x'}`;
  const bad = await runCli(['token', 'revoke', mistyped], env);
  assert.equal(bad.code, 2, 'a mistyped whole token is a usage error');
  assertAbsent(
    [
      ['the stdout of token revoke', r.stdout],
      ['the stderr of token revoke', r.stderr],
      ['the stderr of a mistyped revoke', bad.stderr],
    ],
    token.slice(16, 48),
    'the secret',
  );
});
