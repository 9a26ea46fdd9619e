import assert from 'node:assert/strict';
import { test } from 'node:test';
import { INT64_MAX, INT64_MIN, isInt64, toInt64 } from '../src/int64.js';
import { nextLinkTarget } from '../src/link.js';
import { DEFAULT_RETRY_POLICY, backoffMs, neverSent, parseRetryAfter } from '../src/retry.js';
import { newPlantJson } from '../src/wire.js';

test('toInt64 takes bigints and decimal text across the whole int64 range, exactly', () => {
  assert.equal(toInt64('9007199254740993'), 9007199254740993n);
  assert.equal(toInt64('-9223372036854775808'), INT64_MIN);
  assert.equal(toInt64(INT64_MAX), 9223372036854775807n);
  assert.equal(toInt64('-0'), 0n);
  for (const text of ['9223372036854775808', '-9223372036854775809', '1.0', '1e3', '0x10', '007', ' 1', '+1', '']) {
    assert.throws(() => toInt64(text), RangeError, text);
    assert.equal(isInt64(text), false);
  }
  assert.throws(() => toInt64(2n ** 63n), RangeError);
  assert.throws(() => toInt64(5), TypeError);
  assert.throws(() => toInt64(null), TypeError);
});

test('newPlantJson writes the id as exact digits and leaves tag out only when it is undefined', () => {
  assert.equal(
    newPlantJson({ id: 9007199254740993n, name: 'A "fern"' }),
    '{"id":9007199254740993,"name":"A \\"fern\\""}',
  );
  assert.equal(newPlantJson({ id: '-5', name: 'x', tag: null }), '{"id":-5,"name":"x","tag":null}');
  assert.equal(newPlantJson({ id: '-0', name: 'x', tag: 't' }), '{"id":0,"name":"x","tag":"t"}');
  assert.throws(() => newPlantJson({ id: 1n, name: 5 as unknown as string }), TypeError);
  assert.throws(() => newPlantJson({ id: 1n, name: 'x', tag: 5 as unknown as string }), TypeError);
});

test('nextLinkTarget finds rel="next" among several links, quoted or not, in any case', () => {
  assert.equal(nextLinkTarget('</plants?limit=1&cursor=cDE6LTU>; rel="next"'), '/plants?limit=1&cursor=cDE6LTU');
  assert.equal(nextLinkTarget('</a>; rel="prev", </b>; title="x, y"; rel=next'), '/b');
  assert.equal(nextLinkTarget('</a>; rel="prev next"'), '/a');
  assert.equal(nextLinkTarget('</a>; REL="Next"'), '/a');
  assert.equal(nextLinkTarget('</a>; rel="nextish"'), undefined);
  assert.equal(nextLinkTarget('</a>; rel="prev"; rel="next"'), undefined, 'only the first rel counts');
  assert.equal(nextLinkTarget(null), undefined);
});

test('backoff doubles from 200 ms with equal jitter, capped at 5 s', () => {
  const low = (n: number): number => backoffMs(DEFAULT_RETRY_POLICY, n, () => 0);
  const high = (n: number): number => backoffMs(DEFAULT_RETRY_POLICY, n, () => 1);
  assert.deepEqual([0, 1, 2, 3, 10].map(low), [100, 200, 400, 800, 2500]);
  assert.deepEqual([0, 1, 2, 3, 10].map(high), [200, 400, 800, 1600, 5000]);
});

test('Retry-After is read as seconds or as an HTTP-date', () => {
  assert.equal(parseRetryAfter('2'), 2000);
  assert.equal(parseRetryAfter(' 0 '), 0);
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);
  assert.equal(parseRetryAfter('Thu, 01 Jan 2026 12:00:30 GMT', now), 30_000);
  assert.equal(parseRetryAfter('Thu, 01 Jan 2026 11:00:00 GMT', now), 0);
  assert.equal(parseRetryAfter('soon'), undefined);
  assert.equal(parseRetryAfter(null), undefined);
});

test('parseExactJson reads every integer as an exact bigint, and the rest as JSON.parse does', async () => {
  const { parseExactJson } = await import('../src/exact-json.js');
  assert.deepEqual(parseExactJson('{"id":9007199254740993,"n":-9223372036854775808,"x":1.5,"e":1e3}'), {
    __proto__: null,
    id: 9007199254740993n,
    n: -9223372036854775808n,
    x: 1.5,
    e: 1000,
  });
  assert.deepEqual(parseExactJson(' [ "a\\"\\u00e9\\n", true, false, null, [], {} ] '), [
    'a"é\n',
    true,
    false,
    null,
    [],
    Object.create(null),
  ]);
  const proto = parseExactJson('{"__proto__":{"polluted":1}}') as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(proto), null);
  assert.deepEqual(Object.keys(proto), ['__proto__']);
  for (const bad of ['', '{', '[1,]', '{"a":1,}', '01', '"\u0001"', '[1] x', "{'a':1}", 'nul', '-']) {
    assert.throws(() => parseExactJson(bad), SyntaxError, bad);
  }
});

test('neverSent: a refused connection or an unresolved name sent nothing; a reset, a closed socket or a timeout may have', () => {
  const failed = (cause: unknown): TypeError => new TypeError('fetch failed', { cause });
  const code = (name: string): Error => Object.assign(new Error(name), { code: name });
  assert.equal(neverSent(failed(code('ECONNREFUSED'))), true);
  assert.equal(neverSent(failed(code('ENOTFOUND'))), true);
  // Happy eyeballs: one error per address tried, all of them refused.
  assert.equal(neverSent(failed(new AggregateError([code('ECONNREFUSED'), code('ECONNREFUSED')]))), true);
  assert.equal(neverSent(failed(new AggregateError([code('ECONNREFUSED'), code('ETIMEDOUT')]))), false);
  assert.equal(neverSent(failed(new AggregateError([]))), false);
  assert.equal(neverSent(failed(code('ECONNRESET'))), false);
  assert.equal(neverSent(failed(code('UND_ERR_SOCKET'))), false);
  assert.equal(neverSent(new DOMException('timed out', 'TimeoutError')), false);
  assert.equal(neverSent(undefined), false);
});
