import assert from 'node:assert/strict';
import crypto, { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, mock, test } from 'node:test';
import { crc32 } from 'node:zlib';
import Database from 'better-sqlite3';
import { mintToken, parseToken, sameHash } from '../../src/auth/token.js';
import type { Store } from '../../src/store/store.js';
import { READ_WRITE, type TestApp, makeApp, openTestStore } from '../helpers.js';
import { assertError, assertIndistinguishable, assertOk } from '../plants/plant.helpers.js';
import { runCli } from '../process.js';

// Issue: "the token format carries a checksum (as GitHub's do) and is checked before any lookup;
// SHA-256 at rest; constant-time comparison". Tokens are pst_<id:12><secret:32><checksum:6>.

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET = { from: 16, to: 48 } as const; // after `pst_` and the 12-character id
const INVALID_TOKEN = 'Bearer realm="plant-store", error="invalid_token"';

/** The checksum as the format defines it (CRC32 of the rest, six base62 digits), computed here independently. */
function checksum(body: string): string {
  let n = crc32(body);
  let out = '';
  for (let i = 0; i < 6; i++) {
    out = ALPHABET[n % 62]! + out;
    n = Math.floor(n / 62);
  }
  return out;
}

/** `token` with the character at `i` replaced by another base62 character. */
const changeAt = (token: string, i: number): string =>
  token.slice(0, i) + ALPHABET[(ALPHABET.indexOf(token[i]!) + 1) % 62]! + token.slice(i + 1);

const secretOf = (token: string): string => token.slice(SECRET.from, SECRET.to);
const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

/** The store with every findToken call recorded: which ids the service looked up. */
function countingLookups(store: Store): { store: Store; lookups: string[] } {
  const lookups: string[] = [];
  const counted = new Proxy(store, {
    get(target, key) {
      if (key === 'findToken') {
        return (id: string) => {
          lookups.push(id);
          return target.findToken(id);
        };
      }
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { store: counted, lookups };
}

async function countedApp(t: { after: (fn: () => Promise<void>) => void }): Promise<TestApp & { lookups: string[] }> {
  const { store, lookups } = countingLookups(await openTestStore());
  const h = await makeApp({}, store);
  t.after(() => h.close());
  return Object.assign(h, { lookups });
}

const get = (h: TestApp, token: string) => h.call(token, { method: 'GET', url: '/plants' });

function assertInvalidToken(res: Awaited<ReturnType<typeof get>>): void {
  assertError(res, 401);
  assert.equal(res.headers['www-authenticate'], INVALID_TOKEN);
}

describe('the checksum is checked before any lookup', () => {
  test('a token with any one character changed, checksum not recomputed, answers 401 invalid_token with no store lookup', async (t) => {
    const h = await countedApp(t);
    const token = await h.token('alice', READ_WRITE);
    // Every position: the id, the secret and the checksum itself; CRC32 catches every one-character change.
    for (let i = 'pst_'.length; i < token.length; i++) assertInvalidToken(await get(h, changeAt(token, i)));
    for (const bad of [token.slice(0, -1), `${token}0`, `PST_${token.slice(4)}`, token.slice(4), token.slice(0, 16)]) {
      assertInvalidToken(await get(h, bad));
    }
    assert.deepEqual(h.lookups, [], 'no findToken call for a token that fails its checksum or shape');
    // The counter does see lookups: the genuine token, not yet cached, costs one.
    assertOk(await get(h, token), []);
    assert.deepEqual(h.lookups, [token.slice(4, 16)]);
  });

  test('once its id is cached, a changed token is refused by its digest: 401 invalid_token, no lookup, checksum or not', async (t) => {
    const h = await countedApp(t);
    const token = await h.token('alice', READ_WRITE);
    assertOk(await get(h, token), []); // the record is cached now
    assert.deepEqual(h.lookups, [token.slice(4, 16)]);
    // A cached record skips the checksum; the SHA-256 digest of the whole token still has to match.
    for (let i = 16; i < token.length; i++) assertInvalidToken(await get(h, changeAt(token, i)));
    const body = `${token.slice(0, 16)}${secretOf(mintToken().token)}`;
    assertInvalidToken(await get(h, body + checksum(body)));
    assert.equal(h.lookups.length, 1, 'no further lookup');
    assertOk(await get(h, token), []);
  });

  test('a well-formed token with an unknown id answers 401 invalid_token after exactly one lookup, by its id', async (t) => {
    const h = await countedApp(t);
    await h.token('alice', READ_WRITE);
    const stranger = mintToken();
    assertInvalidToken(await get(h, stranger.token));
    assert.deepEqual(h.lookups, [stranger.id]);
  });

  test('a known id with a wrong secret and a recomputed checksum answers 401 invalid_token after one lookup', async (t) => {
    const h = await countedApp(t);
    const token = await h.token('alice', READ_WRITE);
    const id = token.slice(4, 16);
    const body = `pst_${id}${secretOf(mintToken().token)}`;
    const forged = body + checksum(body);
    assert.equal(
      parseToken(forged),
      id,
      'the forged token passes its checksum: the test computes it as the service does',
    );
    const res = await get(h, forged);
    assertInvalidToken(res);
    assert.deepEqual(h.lookups, [id]);
    // One character of the secret changed, checksum recomputed: the hash comparison refuses it too.
    const near = changeAt(token, 30).slice(0, -6);
    assertInvalidToken(await get(h, near + checksum(near)));
    assertOk(await get(h, token), []);
  });

  test('a bad checksum, an unknown id, a wrong secret and a revoked token get byte-identical 401s', async (t) => {
    const h = await countedApp(t);
    const token = await h.token('alice', READ_WRITE);
    const issued = await h.tokens.create({ subject: 'alice', scopes: READ_WRITE });
    await h.tokens.revoke(issued.id);
    const body = `${token.slice(0, 16)}${secretOf(mintToken().token)}`;
    const answers = [
      await get(h, changeAt(token, 20)),
      await get(h, mintToken().token),
      await get(h, body + checksum(body)),
      await get(h, issued.token),
      await get(h, 'pst_short'),
    ];
    assertInvalidToken(answers[0]!);
    for (const res of answers.slice(1)) assertIndistinguishable(answers[0]!, res);
  });
});

describe('SHA-256 at rest', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-at-rest-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** Every byte SQLite keeps for the database: the file, its write-ahead log and shared memory. */
  const databaseBytes = (path: string): Buffer =>
    Buffer.concat(
      [path, `${path}-wal`, `${path}-shm`, `${path}-journal`].filter(existsSync).map((p) => readFileSync(p)),
    );

  function assertNoSecretIn(bytes: Buffer, token: string, where: string): void {
    const secret = secretOf(token);
    for (const [what, needle] of [
      ['the token', token],
      ['the token without its prefix', token.slice(4)],
      ['the secret', secret],
      ['the first half of the secret', secret.slice(0, 16)],
      ['the second half of the secret', secret.slice(16)],
    ] as const) {
      assert.equal(bytes.indexOf(needle, 0, 'utf8'), -1, `${where}: ${what}, in UTF-8`);
      assert.equal(bytes.indexOf(needle, 0, 'utf16le'), -1, `${where}: ${what}, in UTF-16`);
    }
  }

  test('token create stores sha256(token) as secret_hash, and the token and its secret nowhere in the database files', async () => {
    const path = join(dir, 'store.db');
    const env = { DATABASE_URL: `sqlite:${path}` };
    assert.equal((await runCli(['migrate'], env)).code, 0);
    // A connection held open keeps the CLI's commits in the -wal file: it is not the last to close.
    const reader = new Database(path, { fileMustExist: true });
    reader.prepare('SELECT count(*) FROM api_tokens').get();
    const json = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--json'], env);
    assert.equal(json.code, 0, json.stderr);
    const plain = await runCli(['token', 'create', '--subject', 'bob', '--scopes', 'plants:admin'], env);
    assert.equal(plain.code, 0, plain.stderr);
    const tokens = [(JSON.parse(json.stdout) as { token: string }).token, plain.stdout.trim()];

    const rows = reader.prepare('SELECT id, secret_hash FROM api_tokens ORDER BY subject').all() as Array<{
      id: string;
      secret_hash: Buffer;
    }>;
    assert.deepEqual(
      rows.map((r) => [r.id, r.secret_hash.toString('hex')]),
      tokens.map((token) => [token.slice(4, 16), sha256(token).toString('hex')]),
    );
    const wal = readFileSync(`${path}-wal`);
    for (const token of tokens) assert.notEqual(wal.indexOf(sha256(token)), -1, 'the new rows are in the -wal file');
    for (const [label, bytes] of [
      ['while open', databaseBytes(path)],
      ['after a checkpoint', (reader.close(), databaseBytes(path))],
    ] as const) {
      for (const token of tokens) {
        // The search does find what is stored: the public id and the digest.
        assert.notEqual(bytes.indexOf(token.slice(4, 16)), -1, `${label}: the id is in the files`);
        assert.notEqual(bytes.indexOf(sha256(token)), -1, `${label}: the digest is in the files`);
        assertNoSecretIn(bytes, token, label);
      }
    }
  });
});

describe('constant-time comparison', () => {
  // A timing measurement would be flaky; instead, the comparison the service makes is observed:
  // node's timingSafeEqual, on two SHA-256 digests (never on the secrets, whose lengths could differ).
  test('sameHash answers equality of digests, and false, not an exception, for different lengths', () => {
    const a = sha256('a');
    assert.equal(sameHash(a, Buffer.from(a)), true);
    for (const i of [0, 31]) {
      const b = Buffer.from(a);
      b[i]! ^= 1;
      assert.equal(sameHash(a, b), false, `one bit of byte ${i}`);
    }
    assert.equal(sameHash(a, a.subarray(0, 31)), false);
    assert.equal(sameHash(a, Buffer.alloc(0)), false);
  });

  test('authenticating a known id with a wrong secret compares the two SHA-256 digests with crypto.timingSafeEqual', async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const token = await h.token('alice', READ_WRITE);
    const body = `${token.slice(0, 16)}${secretOf(mintToken().token)}`;
    const forged = body + checksum(body);
    const spy = mock.method(crypto, 'timingSafeEqual');
    syncBuiltinESMExports(); // the named import in src/auth/token.ts now sees the spy
    t.after(() => {
      spy.mock.restore();
      syncBuiltinESMExports();
    });
    const res = await get(h, forged);
    assertInvalidToken(res);
    const compared = spy.mock.calls.map((call) =>
      call.arguments.map((b) => Buffer.from(b as Uint8Array).toString('hex')),
    );
    assert.ok(
      compared.some(
        (pair) => pair.includes(sha256(forged).toString('hex')) && pair.includes(sha256(token).toString('hex')),
      ),
      `timingSafeEqual(sha256(presented), sha256(issued)) was called; calls: ${JSON.stringify(compared)}`,
    );
  });
});
