import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertStatus, assertWellFormed } from './oracle.js';
import { parseAll } from './raw.js';
import { type WireResponse, parseResponse } from './wire.js';

// The fuzzers are only as good as their oracle: it must refuse each way an answer can be wrong.

function response(status: number, body: string, headers: Record<string, string> = {}): WireResponse {
  const all: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-request-id': 'r-1',
    ...headers,
  };
  const entries = Object.entries(all).filter(([, v]) => v !== '');
  return { status, headers: new Map(entries.map(([k, v]) => [k, [v]])), body: Buffer.from(body) };
}

const good = response(404, '{"error":404,"message":"no route GET /x"}');

test('the oracle accepts a correct Error answer', () => {
  assertWellFormed(good);
  assertStatus(good, [400, 404]);
});

const wrong: Array<[string, WireResponse]> = [
  ['a 5xx', response(500, '{"error":500,"message":"internal server error"}')],
  ['a 503 with the Error body', response(503, '{"error":503,"message":"the database is unavailable"}')],
  ['error that is not the status', response(404, '{"error":400,"message":"x"}')],
  ['error as a string', response(404, '{"error":"404","message":"x"}')],
  ['an empty message', response(404, '{"error":404,"message":""}')],
  ['no message', response(404, '{"error":404}')],
  ['an extra key', response(404, '{"error":404,"message":"x","statusCode":404}')],
  ["Fastify's own body", response(404, '{"statusCode":404,"error":"Not Found","message":"x"}')],
  ['a stack trace', response(400, '{"error":400,"message":"boom\\n    at parse (x.js:1:1)"}')],
  ['an array', response(400, '[{"error":400,"message":"x"}]')],
  ['no body', response(400, '')],
  ['not JSON', response(400, 'Bad Request')],
  ['a text/plain error', response(400, '{"error":400,"message":"x"}', { 'content-type': 'text/plain' })],
  ['a wrong Content-Length', response(404, good.body.toString(), { 'content-length': '3' })],
  ['no Cache-Control', response(404, good.body.toString(), { 'cache-control': '' })],
  ['no nosniff', response(404, good.body.toString(), { 'x-content-type-options': '' })],
  ['no X-Request-Id', response(404, good.body.toString(), { 'x-request-id': '' })],
];

for (const [name, answer] of wrong) {
  test(`the oracle refuses ${name}`, () => {
    assert.throws(() => assertWellFormed(answer));
  });
}

test('the oracle refuses an answer of another status than predicted', () => {
  assert.throws(() => assertStatus(good, 400));
});

test('the response reader refuses what is not HTTP/1.1 and waits for what is incomplete', () => {
  assert.throws(() => parseResponse(Buffer.from('HTTP/1.0 200 OK\r\n\r\n'), false, true));
  assert.throws(() => parseResponse(Buffer.from('garbage\r\n\r\n'), false, true));
  assert.throws(() => parseResponse(Buffer.from('HTTP/1.1 200 OK\r\nno colon\r\n\r\n'), false, true));
  assert.equal(parseResponse(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc'), false, false), undefined);
  const { responses, rest } = parseAll(Buffer.from('HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 400 Bad'));
  assert.equal(responses.length, 1);
  assert.equal(rest.toString(), 'HTTP/1.1 400 Bad', 'a partial response is left over, for the test to refuse');
});
