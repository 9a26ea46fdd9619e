import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redactUrl } from '../../src/http/request-log.js';

// What the request log writes of a URL: credentials a caller put in it are replaced.

test('API tokens, JWTs and credential-named query parameters are redacted', () => {
  const jwt = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl';
  const cases: Array<[string, string]> = [
    ['/plants?limit=10', '/plants?limit=10'],
    ['/plants?access_token=pst_abc123', '/plants?access_token=[redacted]'],
    ['/pst_C5MG3jubua0kaSmjdzoTL1wuGkXqVtbyO590YcFnAlvx1oAY5p?limit=1', '/[redacted]?limit=1'],
    ['/plants?tag=pst%5FC5MG3jubua0k', '/plants?tag=[redacted]'],
    [`/plants?tag=${jwt}&limit=5`, '/plants?tag=[redacted]&limit=5'],
    ['/plants?api_key=s3cret&limit=5', '/plants?api_key=[redacted]&limit=5'],
    ['/plants?limit=5&authorization=Bearer%20x', '/plants?limit=5&authorization=[redacted]'],
    ['/plants?tag=monkey=1', '/plants?tag=monkey=1'], // "key=" inside a value is not a parameter
  ];
  for (const [url, logged] of cases) assert.equal(redactUrl(url), logged, url);
});

test('a long URL is logged cut, with its length', () => {
  const url = `/plants?tag=${'x'.repeat(5000)}`;
  const logged = redactUrl(url);
  assert.ok(logged.length < 2100);
  assert.ok(logged.endsWith(`…(${url.length} characters)`));
});

test('a URL full of JWT-like starts is still redacted correctly (the patterns are linear)', () => {
  const url = `/nope?x=${'eyJ'.repeat(5300)}`;
  assert.equal(redactUrl(url), `${url.slice(0, 2048)}…(${url.length} characters)`);
  assert.equal(redactUrl(`/nope?x=${'eyJ'.repeat(3)}.a.b`), '/nope?x=[redacted]');
});

test('every credential-named query parameter is redacted, in any case, first or later', () => {
  const names = ['access_token', 'token', 'jwt', 'apikey', 'api_key', 'key', 'authorization', 'secret', 'password'];
  for (const name of names) {
    for (const written of [name, name.toUpperCase()]) {
      assert.equal(redactUrl(`/plants?${written}=x1`), `/plants?${written}=[redacted]`, written);
      assert.equal(redactUrl(`/plants?limit=5&${written}=x1`), `/plants?limit=5&${written}=[redacted]`, written);
    }
  }
  assert.equal(redactUrl('/plants?tag=PST_abc'), '/plants?tag=[redacted]');
});
