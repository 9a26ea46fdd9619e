import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import type { InjectOptions } from 'fastify';
import { READ_WRITE, json, makeApp } from '../helpers.js';
import { assertErrorBody } from './support.js';

const PLANT = '{"id":1,"name":"fern"}';

function post(payload: InjectOptions['payload'], contentType?: string): InjectOptions {
  return {
    method: 'POST',
    url: '/plants',
    ...(payload === undefined ? {} : { payload }),
    ...(contentType === undefined ? {} : { headers: { 'content-type': contentType } }),
  };
}

test('POST /plants refuses a body that is not application/json with 415', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const contentType of [
    'text/plain',
    'application/xml',
    'application/x-www-form-urlencoded',
    'application/json; charset=latin1',
    'application/json; charset=iso-8859-1',
    'application/jsonx',
    'application/json-patch+json',
  ]) {
    assertErrorBody(await h.call(token, post(PLANT, contentType)), 415);
  }
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), []);
});

test('POST /plants without Content-Type answers 415, with a body or without one', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  await t.test('with a body', async () => assertErrorBody(await h.call(token, post(PLANT)), 415));
  await t.test('without a body', async () => assertErrorBody(await h.call(token, post(undefined)), 415));
});

test('POST /plants accepts application/json with a UTF-8 charset and in any letter case', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const types = [
    'application/json; charset=utf-8',
    'application/json;charset=UTF-8',
    'Application/JSON',
    'APPLICATION/JSON',
  ];
  for (const [i, contentType] of types.entries()) {
    const response = await h.call(token, post(`{"id":${i},"name":"fern ${i}"}`, contentType));
    assert.equal(response.statusCode, 200, `${contentType}: ${response.body}`);
    assert.deepEqual(response.json(), { name: `fern ${i}` });
  }
});

test('POST /plants answers 413 for a body over the default 16 KiB limit', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const body = `{"id":1,"name":"fern"${' '.repeat(16 * 1024 - PLANT.length + 1)}}`;
  assert.equal(Buffer.byteLength(body), 16 * 1024 + 1);
  assertErrorBody(await h.call(token, post(body, 'application/json')), 413);
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), []);
});

test('POST /plants honours a configured body limit: the limit passes, one byte more is 413', async (t) => {
  const h = await makeApp({ bodyLimit: 100 });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const padded = (length: number): string => `{"id":1,"name":"fern"${' '.repeat(length - PLANT.length)}}`;
  assertErrorBody(await h.call(token, post(padded(101), 'application/json')), 413);
  const atLimit = await h.call(token, post(padded(100), 'application/json'));
  assert.equal(atLimit.statusCode, 200, atLimit.body);
  assert.deepEqual(atLimit.json(), { name: 'fern' });
});

test('POST /plants answers 413 for a streamed body without Content-Length over the limit', async (t) => {
  const h = await makeApp({ bodyLimit: 100 });
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const stream = Readable.from([Buffer.from('{"id":1,"name":"'), Buffer.from('x'.repeat(200)), Buffer.from('"}')]);
  assertErrorBody(await h.call(token, post(stream, 'application/json')), 413);
});

test('POST /plants answers 400 for a body that is not valid UTF-8', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const around = (bytes: number[]): Buffer =>
    Buffer.concat([Buffer.from('{"id":1,"name":"'), Buffer.from(bytes), Buffer.from('"}')]);
  for (const bytes of [[0xff], [0xc3], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0x80]]) {
    assertErrorBody(await h.call(token, post(around(bytes), 'application/json')), 400);
  }
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), []);
});

test('POST /plants answers 400 for malformed JSON and duplicate keys', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const body of [
    '',
    '{',
    '{"id":1,"name":"fern",}',
    "{'id':1,'name':'fern'}",
    '{"id":01,"name":"fern"}',
    '{"id":NaN,"name":"fern"}',
    '{"id":1,"name":"fern"} trailing',
    '\uFEFF{"id":1,"name":"fern"}',
    '{"id":1,"name":"fe\u0001rn"}',
    '{"id":1,"name":"fern","name":"fern"}',
    '{"id":1,"id":1,"name":"fern"}',
    '{"id":1,"name":"fern","tag":"a","tag":"b"}',
    '['.repeat(100) + ']'.repeat(100),
  ]) {
    const response = await h.call(token, post(body, 'application/json'));
    assertErrorBody(response, 400);
  }
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), []);
});

test('POST /plants answers 400 for a body that is not a JSON object', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const body of ['[{"id":1,"name":"fern"}]', '[]', 'null', '"fern"', '1', 'true']) {
    assertErrorBody(await h.call(token, post(body, 'application/json')), 400);
  }
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), []);
});

test('POST /plants answers 400 for __proto__ and constructor keys and pollutes no prototype', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  for (const body of [
    '{"__proto__":{"polluted":true},"id":1,"name":"fern"}',
    '{"id":1,"name":"fern","__proto__":{"polluted":true}}',
    '{"id":1,"name":"fern","__proto__":{"tag":"x","polluted":true}}',
    '{"constructor":{"prototype":{"polluted":true}},"id":1,"name":"fern"}',
    '{"id":1,"name":"fern","constructor":{"prototype":{"polluted":true}}}',
    '{"__proto__":{"id":1,"name":"fern"}}',
  ]) {
    assertErrorBody(await h.call(token, post(body, 'application/json')), 400);
    assert.equal(({} as Record<string, unknown>).polluted, undefined, body);
    assert.equal(Object.hasOwn(Object.prototype, 'polluted'), false, body);
  }
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.equal(listed.statusCode, 200);
  assert.deepEqual(listed.json(), []);
});

test('a JSON Content-Type with no body does not stop a DELETE, and a POST without a body is a 400', async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  assert.equal(
    (await h.call(token, { method: 'POST', url: '/plants', ...json('{"id":7,"name":"fern"}') })).statusCode,
    200,
  );
  const deleted = await h.call(token, {
    method: 'DELETE',
    url: '/plants/7',
    headers: { 'content-type': 'application/json', 'content-length': '0' },
  });
  assert.equal(deleted.statusCode, 204);
  assert.equal(deleted.body, '');
  const empty = await h.call(token, { method: 'POST', url: '/plants', ...json('') });
  assertErrorBody(empty, 400);
  assert.equal(empty.json<{ message: string }>().message, 'body must be a JSON object');
});
