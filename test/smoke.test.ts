import assert from 'node:assert/strict';
import { test } from 'node:test';
import { READ_WRITE, json, makeApp } from './helpers.js';

test('the test helper builds an app that creates and lists a plant', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const created = await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":1,"name":"fern"}') });
  assert.equal(created.statusCode, 200);
  assert.deepEqual(created.json(), { name: 'fern' });
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), [{ name: 'fern' }]);
});
