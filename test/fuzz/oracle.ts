import assert from 'node:assert/strict';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { type WireResponse, header } from './wire.js';

// What every response must look like, whatever was sent (docs/api.md#shapes, docs/api.md#errors and
// docs/api.md#headers).

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const show = (response: WireResponse): string =>
  `${response.status} ${JSON.stringify(Object.fromEntries(response.headers))} ${response.body.toString('utf8').slice(0, 500)}`;

/** The Error body: exactly `error` (= the status) and a non-empty `message`, without a stack trace. */
export function assertErrorBody(body: Buffer, status: number): void {
  const parsed: unknown = JSON.parse(body.toString('utf8'));
  assert.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'the Error body is an object');
  const error = parsed as Record<string, unknown>;
  assert.deepEqual(Object.keys(error).sort(), ['error', 'message'], 'the Error body has exactly error and message');
  assert.equal(error.error, status, 'error equals the status');
  assert.equal(typeof error.message, 'string');
  assert.ok((error.message as string).length > 0, 'the message is not empty');
  assert.doesNotMatch(error.message as string, /\n\s+at /, 'no stack trace');
}

/**
 * The checks every response passes: no 5xx, the framing and API headers, the Error body for every
 * error. `head`: the request was HEAD, so there is no body to check.
 */
export function assertWellFormed(response: WireResponse, head = false): void {
  try {
    assert.ok(response.status < 500, 'never a 5xx');
    const length = response.headers.get('content-length');
    if (length !== undefined && !head) assert.equal(Number(length[0]), response.body.length, 'Content-Length');
    assert.equal(header(response, 'cache-control'), 'no-store');
    assert.equal(header(response, 'x-content-type-options'), 'nosniff');
    assert.equal(response.headers.get('x-request-id')?.length, 1, 'one X-Request-Id');
    if (response.status >= 400) {
      assert.match(header(response, 'content-type') ?? '', /^application\/json\b/i, 'an error is JSON');
      if (!head) assertErrorBody(decodedBody(response), response.status);
    }
  } catch (error) {
    throw new Error(`a malformed response: ${show(response)}`, { cause: error });
  }
}

/** `assertWellFormed`, and the status is one of `expected`. */
export function assertStatus(response: WireResponse, expected: number | readonly number[], head = false): void {
  const statuses = typeof expected === 'number' ? [expected] : expected;
  assert.ok(statuses.includes(response.status), `expected ${statuses.join(' or ')}, got ${show(response)}`);
  assertWellFormed(response, head);
}

/** The X-Request-Id answer: the caller's when it is sane (RFC-style visible ASCII, ≤ 128), a UUID otherwise. */
export function assertRequestId(response: WireResponse, sent: readonly string[]): void {
  const echoed = header(response, 'x-request-id') ?? '';
  const given = sent.length === 1 ? sent[0]!.replace(/^[\t ]+|[\t ]+$/g, '') : undefined; // OWS only
  if (given !== undefined && /^[\x21-\x7e]{1,128}$/.test(given))
    assert.equal(echoed, given, 'the request id is echoed');
  else assert.match(echoed, UUID, `a generated request id for ${JSON.stringify(sent)}`);
}

/** A JSON body, parsed; plants come back exactly in the Plant shape. */
export function jsonBody(response: WireResponse): unknown {
  assert.match(header(response, 'content-type') ?? '', /^application\/json\b/i, 'JSON');
  return JSON.parse(decodedBody(response).toString('utf8'));
}

/** The body with its Content-Encoding undone, as a client that sent Accept-Encoding reads it. */
export function decodedBody(response: WireResponse): Buffer {
  const encoding = header(response, 'content-encoding');
  if (encoding === 'gzip') return gunzipSync(response.body);
  if (encoding === 'br') return brotliDecompressSync(response.body);
  assert.equal(encoding, undefined, 'no other content coding');
  return response.body;
}

/** The Plant shape of a stored plant: `tag` only when it has one, no id, nothing else. */
export const plantJson = (plant: { readonly name: string; readonly tag: string | null }): object =>
  plant.tag === null ? { name: plant.name } : { name: plant.name, tag: plant.tag };

export function assertPlant(value: unknown, expected: { readonly name: string; readonly tag: string | null }): void {
  assert.deepEqual(value, plantJson(expected));
}
