import assert from 'node:assert/strict';
import { decodeCursor } from '../../src/plants/cursor.js';
import { type AuthCase, type Principal, type Principals, authFailure } from './auth.arb.js';
import type { BodyCase } from './body.arb.js';
import type { PlantModel } from './model.js';
import { assertPlant, assertStatus, jsonBody } from './oracle.js';
import type { QueryCase } from './query.arb.js';
import { type WireResponse, header } from './wire.js';

// The answer of each operation, predicted from the model (docs/api.md#plants).

export interface Fuzz {
  readonly model: PlantModel;
  readonly principals: Principals;
  readonly bodyLimit: number;
}

/** Checks the authentication answer when there is one; answers the caller when it may go on. */
export function expectAuth(
  fuzz: Fuzz,
  response: WireResponse,
  auth: AuthCase,
  scope: string,
  head = false,
): Principal | undefined {
  const failure = authFailure(auth, fuzz.principals, scope);
  if (failure) {
    assertStatus(response, failure.status, head);
    assert.equal(header(response, 'www-authenticate'), failure.challenge);
    return undefined;
  }
  assert.ok(auth.kind === 'token', 'only a token gets past authentication');
  return fuzz.principals.who[auth.who];
}

export interface CreateRequest {
  readonly auth: AuthCase;
  readonly body: BodyCase;
  readonly json: boolean;
  readonly identity: boolean;
}

export function expectCreate(fuzz: Fuzz, response: WireResponse, request: CreateRequest): void {
  const caller = expectAuth(fuzz, response, request.auth, 'plants:write');
  if (!caller) return;
  const { body } = request;
  const tooLarge = body.bytes.length > fuzz.bodyLimit;
  if (!request.json || !request.identity) return assertStatus(response, tooLarge ? [413, 415] : 415);
  if (tooLarge) return assertStatus(response, 413);
  if (body.plant === undefined) return assertStatus(response, 400);
  const { id, name, tag } = body.plant;
  const predicted = fuzz.model.create(caller, id, name, tag);
  assertStatus(response, predicted.status);
  if (predicted.plant) assertPlant(jsonBody(response), predicted.plant);
  // "The 409 message never reveals who owns the id."
  else assert.doesNotMatch(response.body.toString(), /fuzz-/);
}

/** `ifNoneMatchAny`: the request said `If-None-Match: *`, so a page that is answered at all is a 304. */
export function expectList(
  fuzz: Fuzz,
  response: WireResponse,
  auth: AuthCase,
  query: QueryCase,
  head = false,
  ifNoneMatchAny = false,
): void {
  const caller = expectAuth(fuzz, response, auth, 'plants:read', head);
  if (!caller) return;
  if (query.ask === undefined) return assertStatus(response, 400, head);
  assertStatus(response, ifNoneMatchAny ? 304 : 200, head);
  assert.match(header(response, 'etag') ?? '', /^"[^"]+"$/, 'a strong ETag');
  const page = fuzz.model.list(caller, query.ask);
  if (ifNoneMatchAny) assert.equal(response.body.length, 0, 'a 304 has no body');
  else if (!head) {
    const plants = jsonBody(response);
    assert.ok(Array.isArray(plants), 'a JSON array');
    assert.equal(plants.length, page.plants.length, 'the page length');
    page.plants.forEach((plant, i) => assertPlant(plants[i], plant));
  }
  const link = header(response, 'link');
  if (page.lastId === undefined) return assert.equal(link, undefined, 'no Link on the last page');
  const m = /^<\/plants\?([^>]*)>; rel="next"$/.exec(link ?? '');
  assert.ok(m, `a Link to the next page, got ${link}`);
  const next = new URLSearchParams(m[1]);
  assert.equal(next.get('limit'), String(query.ask.limit));
  assert.equal(next.get('tag') ?? undefined, query.ask.tag);
  assert.equal(decodeCursor(next.get('cursor') ?? ''), page.lastId, 'the cursor names the last plant of the page');
}

export function expectDelete(
  fuzz: Fuzz,
  response: WireResponse,
  auth: AuthCase,
  path: { id: bigint | undefined; malformed: boolean },
): void {
  // Authentication first, even for a target whose percent-encoding is broken.
  const caller = expectAuth(fuzz, response, auth, 'plants:write');
  if (!caller) return;
  if (path.malformed || path.id === undefined) return assertStatus(response, 400);
  const predicted = fuzz.model.delete(caller, path.id);
  assertStatus(response, predicted);
  if (predicted === 204) assert.equal(response.body.length, 0, 'a 204 has no body');
}
