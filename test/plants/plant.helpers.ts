import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { hashToken, mintToken } from '../../src/auth/token.js';
import { type TestApp, json } from '../helpers.js';

export type Response = LightMyRequestResponse;

export interface PlantJson {
  name: string;
  tag?: string;
}

export interface ErrorJson {
  error: number;
  message: string;
}

export const INT64_MIN = '-9223372036854775808';
export const INT64_MAX = '9223372036854775807';
export const TWO_POW_53 = '9007199254740992';
export const TWO_POW_53_PLUS_1 = '9007199254740993';

/** Headers every API response carries (docs/api.md#headers). */
export function assertApiHeaders(res: Response): void {
  assert.equal(res.headers['cache-control'], 'no-store', 'Cache-Control');
  assert.equal(res.headers['x-content-type-options'], 'nosniff', 'X-Content-Type-Options');
}

function assertJsonType(res: Response): void {
  assert.match(String(res.headers['content-type']), /^application\/json(?:;|$)/, 'Content-Type');
}

const parse = (res: Response): unknown => JSON.parse(res.payload) as unknown;

/** A 200 whose JSON body is exactly `body` (no extra keys: deepStrictEqual compares key sets). */
/** The JSON body of an answer of `status` that carries the API's headers, typed as the caller expects. */
export function jsonBody<T>(res: Response, status = 200): T {
  assert.equal(res.statusCode, status, `status (body: ${res.payload.slice(0, 300)})`);
  assertApiHeaders(res);
  return JSON.parse(res.payload) as T;
}

export function assertOk(res: Response, body: unknown): void {
  assert.equal(res.statusCode, 200, `status (body: ${res.payload.slice(0, 300)})`);
  assertApiHeaders(res);
  assertJsonType(res);
  assert.deepEqual(parse(res), body);
}

/** A 200 with a JSON array of Plant; answers the plants. */
export function assertPlantList(res: Response): PlantJson[] {
  assert.equal(res.statusCode, 200, `status (body: ${res.payload.slice(0, 300)})`);
  assertApiHeaders(res);
  assertJsonType(res);
  const body = parse(res);
  assert.ok(Array.isArray(body), 'the body is an array');
  for (const plant of body as unknown[]) assertPlantShape(plant);
  return body as PlantJson[];
}

/** Plant: `name`, and `tag` only when the plant has one; no id, no other key. */
export function assertPlantShape(plant: unknown): asserts plant is PlantJson {
  assert.ok(typeof plant === 'object' && plant !== null && !Array.isArray(plant), 'a plant is an object');
  const record = plant as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  assert.ok(keys.join() === 'name' || keys.join() === 'name,tag', `plant keys: ${keys.join()}`);
  assert.equal(typeof record.name, 'string');
  if ('tag' in record) assert.equal(typeof record.tag, 'string');
}

/** An Error body: exactly `error` (= the status) and a non-empty `message` without a stack trace. */
export function assertError(res: Response, status: number): ErrorJson {
  assert.equal(res.statusCode, status, `status (body: ${res.payload.slice(0, 300)})`);
  assertApiHeaders(res);
  assertJsonType(res);
  const body = parse(res) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message']);
  assert.equal(body.error, status);
  assert.equal(typeof body.message, 'string');
  const message = body.message as string;
  assert.ok(message.trim().length > 0, 'the message is not empty');
  assert.doesNotMatch(message, /\n\s+at /, 'no stack trace');
  return { error: status, message };
}

/** A 204 with no body at all. */
export function assertNoContent(res: Response): void {
  assert.equal(res.statusCode, 204, `status (body: ${res.payload.slice(0, 300)})`);
  assertApiHeaders(res);
  assert.equal(res.payload, '');
  assert.ok(['0', undefined].includes(res.headers['content-length'] as string | undefined), 'no content length');
}

/** 403 with the RFC 6750 challenge naming the scope the operation needs. */
export function assertForbidden(res: Response, scope: string): void {
  assertError(res, 403);
  assert.equal(
    res.headers['www-authenticate'],
    `Bearer realm="plant-store", error="insufficient_scope", scope="${scope}"`,
  );
}

/** A NewPlant body with the id written as given, digit for digit (never through a JS number). */
export function plantBody(id: string, name: string, tag?: string | null): string {
  const tagPart = tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`;
  return `{"id":${id},"name":${JSON.stringify(name)}${tagPart}}`;
}

export const create = (h: TestApp, token: string | undefined, body: string): Promise<Response> =>
  h.call(token, { method: 'POST', url: '/plants', ...json(body) });

export const list = (h: TestApp, token: string | undefined, query = ''): Promise<Response> =>
  h.call(token, { method: 'GET', url: `/plants${query}` });

/** DELETE /plants/<id>, with `id` placed in the path exactly as given (already URL-encoded). */
export const remove = (h: TestApp, token: string | undefined, id: string): Promise<Response> =>
  h.call(token, { method: 'DELETE', url: `/plants/${id}` });

export const nameOf = (id: string): string => `plant ${id}`;

/** Creates one plant per id, named nameOf(id), one after another; every create must answer 200. */
export async function seed(
  h: TestApp,
  token: string,
  ids: readonly string[],
  tagOf: (id: string) => string | undefined = () => undefined,
): Promise<void> {
  for (const id of ids) {
    const tag = tagOf(id);
    const res = await create(h, token, plantBody(id, nameOf(id), tag));
    assertOk(res, tag === undefined ? { name: nameOf(id) } : { name: nameOf(id), tag });
  }
}

const LINK = /^<(\/plants\?[^<>]*)>; rel="next"$/;

/** The target of the `Link: <…>; rel="next"` header (RFC 8288), or undefined when there is none. */
export function nextLink(res: Response): string | undefined {
  const link = res.headers.link;
  if (link === undefined) return undefined;
  assert.equal(typeof link, 'string', 'one Link header');
  const target = LINK.exec(link as string)?.[1];
  assert.ok(target !== undefined, `Link header format: ${String(link)}`);
  assert.ok(new URLSearchParams(target.split('?')[1]).get('cursor'), 'the link carries a cursor');
  return target;
}

/** Follows next links from `url` until the last page; answers each page's plants. */
export async function followPages(h: TestApp, token: string, url: string, maxPages = 2000): Promise<PlantJson[][]> {
  const pages: PlantJson[][] = [];
  for (let next: string | undefined = url; next !== undefined;) {
    assert.ok(pages.length < maxPages, 'pagination ends');
    const res = await h.call(token, { method: 'GET', url: next });
    pages.push(assertPlantList(res));
    next = nextLink(res);
  }
  return pages;
}

// Headers that differ from one response to the next whatever was asked: the request id, the date,
// and the rate-limit counters of the token (draft-ietf-httpapi-ratelimit-headers, and x- forms).
const PER_RESPONSE = /^(?:x-request-id|date|(?:x-)?ratelimit(?:-.*)?)$/;

/** Response headers without those that differ on every response. */
export function stableHeaders(res: Response): Record<string, unknown> {
  return Object.fromEntries(Object.entries(res.headers).filter(([name]) => !PER_RESPONSE.test(name)));
}

/** Two answers a client cannot tell apart: same status, same body bytes, same headers (but per-response ones). */
export function assertIndistinguishable(a: Response, b: Response, what = 'the two answers'): void {
  assert.equal(a.statusCode, b.statusCode, `${what}: status`);
  assert.ok(a.rawPayload.equals(b.rawPayload), `${what}: body bytes\n${a.payload}\n${b.payload}`);
  assert.deepEqual(stableHeaders(a), stableHeaders(b), `${what}: headers`);
}

/**
 * A token for any list of scopes, even those `token create` refuses (none at all, names the
 * service does not know, other letter case), as a JWT's scope claim may carry: written straight
 * to the store, so it exercises the authorization rules rather than the CLI's checks.
 */
export async function tokenWithScopes(h: TestApp, subject: string, scopes: readonly string[]): Promise<string> {
  const { id, token } = mintToken();
  const record = { id, secretHash: hashToken(token), subject, scopes, createdAt: 0, expiresAt: null, revokedAt: null };
  await h.store.createToken(record);
  return token;
}
