import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig, parseTrustProxy } from '../../src/config.js';

test('TRUST_PROXY: addresses, CIDR ranges and proxy-addr names; empty trusts none; anything else refused', () => {
  assert.equal(parseTrustProxy(''), null);
  assert.deepEqual(parseTrustProxy(' 127.0.0.1, 10.0.0.0/8 ,::1,fd00::/8,loopback,uniquelocal'), [
    '127.0.0.1',
    '10.0.0.0/8',
    '::1',
    'fd00::/8',
    'loopback',
    'uniquelocal',
  ]);
  for (const bad of ['*', 'true', '10.0.0.0/33', '::/129', 'proxy.example', '10.0.0.1/8/1', '10.0.0.0/']) {
    assert.throws(
      () => parseTrustProxy(bad),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message ===
          `TRUST_PROXY must list the proxies in front of the service: addresses, CIDR ranges (10.0.0.0/8) or loopback, linklocal, uniquelocal, comma-separated; got "${bad}"`,
      bad,
    );
  }
  assert.equal(loadConfig({}).trustProxy, null);
  assert.deepEqual(loadConfig({ TRUST_PROXY: '127.0.0.1' }).trustProxy, ['127.0.0.1']);
});

test('HEADERS_TIMEOUT longer than REQUEST_TIMEOUT could never take effect: refused at start, saying why', () => {
  assert.throws(
    () => loadConfig({ HEADERS_TIMEOUT: '40s' }),
    (error: Error) =>
      error instanceof ConfigError &&
      error.message ===
        'HEADERS_TIMEOUT (40s) must not be longer than REQUEST_TIMEOUT (30s): the whole request, headers included, ends at REQUEST_TIMEOUT',
  );
  assert.throws(
    () => loadConfig({ HEADERS_TIMEOUT: '5s', REQUEST_TIMEOUT: '2s' }),
    /HEADERS_TIMEOUT \(5s\) must not be longer than REQUEST_TIMEOUT \(2s\)/,
  );
  const equal = loadConfig({ HEADERS_TIMEOUT: '30s' });
  assert.equal(equal.headersTimeoutMs, 30_000);
  assert.equal(equal.requestTimeoutMs, 30_000);
});
