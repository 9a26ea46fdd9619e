import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import { stopSharedPostgres } from '../support/postgres.js';
import { assertWellFormed } from './oracle.js';
import { ID_SLOT, type RawCase, exchange } from './raw.js';
import { rawCaseArb } from './raw.arb.js';
import { REPLAY, runs } from './settings.js';
import { WireClient, counter } from './wire.js';

// The HTTP parser's own answers (docs/api.md#errors): whatever bytes arrive, every
// response sent is complete, well-formed and carries the Error body; a request that cannot be
// answered is closed without a byte.

let h: TestApp;
let port: number;
let token: string;
let nextId = 10n ** 18n; // 19 digits, the width of ID_SLOT

before(async () => {
  h = await makeApp();
  token = await h.token('fuzz-parser', ['plants:read', 'plants:write']);
  port = await listen(h);
});

after(async () => {
  await h.close();
  await stopSharedPostgres(); // TEST_ENGINE=postgres without TEST_DATABASE_URL starts a throwaway server
});

/** What each kind of case was answered, for the diagnostics: `oversized headers → 431` … */
const seen = new Map<string, number>();

async function check(c: RawCase): Promise<void> {
  const digits = String((nextId += 1n));
  let digit = 0;
  const bytes = c.bytes.replaceAll(ID_SLOT[0]!, () => digits[digit++ % digits.length]!);
  const result = await exchange(port, Buffer.from(bytes, 'latin1'), { halfClose: c.halfClose });
  assert.equal(result.rest.length, 0, `only complete responses, got ${JSON.stringify(result.rest.toString('latin1'))}`);
  const finals = result.responses.filter((r) => r.status >= 200); // 100 Continue is not an answer
  const key = `${c.kind} → ${finals.map((r) => r.status).join('+') || 'closed'}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);
  for (const response of finals) assertWellFormed(response);
  assert.ok(!result.open || finals.length > 0, 'the server neither answered nor closed the connection');
  if (finals.length === 0) return assert.ok(c.silenceOk, 'an answer');
  const answer = finals[finals.length - 1]!;
  assert.ok(finals.length === 1, `one answer, got ${finals.map((r) => r.status).join(', ')}`);
  if (c.expect !== 'any') {
    assert.ok(c.expect.includes(answer.status), `expected ${c.expect.join(' or ')}, got ${answer.status}`);
  }
}

test(`whatever bytes arrive, every response is complete and well-formed`, async (t) => {
  t.diagnostic(REPLAY);
  await fc.assert(fc.asyncProperty(rawCaseArb(token), check), runs(1500));
  t.diagnostic(`${counter.requests} connections`);
  for (const [key, n] of [...seen].sort()) t.diagnostic(`${key}: ${n}`);
});

test('afterwards the service answers a new client correctly', async () => {
  const client = new WireClient(port);
  try {
    const auth: Array<[string, string]> = [['Authorization', `Bearer ${token}`]];
    const body = Buffer.from('{"id":-9223372036854775808,"name":"after the storm"}');
    const headers: Array<[string, string]> = [...auth, ['Content-Type', 'application/json; charset=utf-8']];
    const created = await client.send({ method: 'POST', target: '/plants', headers, body });
    assert.equal(created.status, 200, created.body.toString());
    const listed = await client.send({ method: 'GET', target: '/plants?limit=1', headers: auth });
    assert.deepEqual(JSON.parse(listed.body.toString()), [{ name: 'after the storm' }]);
    const deleted = await client.send({ method: 'DELETE', target: '/plants/-9223372036854775808', headers: auth });
    assert.equal(deleted.status, 204);
  } finally {
    client.close();
  }
});
