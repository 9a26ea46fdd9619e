import assert from 'node:assert/strict';
import fc from 'fast-check';
import { type AuthCase, type Principals, authArb } from './auth.arb.js';
import { type BodyCase, draftArb, renderBody } from './body.arb.js';
import { type Fuzz, expectCreate, expectDelete, expectList } from './expect.js';
import type { Header } from './headers.arb.js';
import { idArb } from './int64.arb.js';
import { assertStatus, jsonBody } from './oracle.js';
import { validTextArb } from './text.arb.js';
import { type WireResponse, bytes, header } from './wire.js';

// Every method on every kind of path: 404 for unknown paths, 405 with Allow for a wrong method,
// then authentication, then the operation (docs/api.md#authentication, docs/api.md#errors).

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE'] as const;
const ALLOW = { plants: 'GET, HEAD, POST', plant: 'DELETE', system: 'GET, HEAD' } as const;
const UNKNOWN = [
  '/',
  '/nowhere',
  '/PLANTS',
  '/plant',
  '/plants/1/x',
  '/plantsx',
  '/plants.json',
  '/healthz/x',
  '/Healthz',
];

export interface MatrixCase {
  readonly method: (typeof METHODS)[number];
  readonly kind: 'plants' | 'plant' | 'system' | 'unknown';
  readonly target: string;
  readonly auth: AuthCase;
  readonly id: bigint;
  readonly body: BodyCase | undefined;
}

export function matrixArb(principals: Principals): fc.Arbitrary<MatrixCase> {
  const where = fc.oneof(
    { weight: 3, arbitrary: fc.constant({ kind: 'plants' as const, target: '/plants' }) },
    { weight: 3, arbitrary: fc.constant({ kind: 'plant' as const, target: '' }) },
    fc.constantFrom('/healthz', '/readyz', '/openapi.json').map((target) => ({ kind: 'system' as const, target })),
    fc.constantFrom(...UNKNOWN).map((target) => ({ kind: 'unknown' as const, target })),
  );
  // Half the time a method the path allows, so that as many requests reach authentication as stop at 405.
  const methodArb = fc.tuple(fc.constantFrom(...METHODS), fc.boolean(), fc.nat());
  return fc
    .record({ methods: methodArb, where, auth: authArb(principals), id: idArb, draft: draftArb })
    .map(({ methods: [any, allowed, i], where, auth, id, draft }) => {
      const choices = where.kind === 'unknown' ? [] : (ALLOW[where.kind].split(', ') as Array<MatrixCase['method']>);
      const method = allowed && choices.length > 0 ? choices[i % choices.length]! : any;
      return {
        method,
        kind: where.kind,
        target: where.kind === 'plant' ? `/plants/${id}` : where.target,
        auth,
        id,
        body: ['POST', 'PUT', 'PATCH'].includes(method) ? renderBody(draft, { kind: 'none' }) : undefined,
      };
    });
}

/** `other`: the request's other headers; `If-None-Match: *` among them makes a list a 304. */
export function expectMatrix(fuzz: Fuzz, response: WireResponse, c: MatrixCase, other: readonly Header[] = []): void {
  const head = c.method === 'HEAD';
  if (c.kind === 'unknown') return assertStatus(response, 404, head);
  const allowed = ALLOW[c.kind];
  if (!allowed.split(', ').includes(c.method)) {
    assertStatus(response, 405, head);
    return assert.equal(header(response, 'allow'), allowed);
  }
  if (c.kind === 'system') {
    assertStatus(response, 200, head);
    if (head) return;
    const body = jsonBody(response) as Record<string, unknown>;
    if (c.target === '/openapi.json') return assert.equal(body.openapi, '3.1.0');
    return assert.deepEqual(body, { status: c.target === '/healthz' ? 'ok' : 'ready' });
  }
  if (c.kind === 'plant') return expectDelete(fuzz, response, c.auth, { id: c.id, malformed: false });
  if (c.method === 'POST')
    return expectCreate(fuzz, response, { auth: c.auth, body: c.body!, json: true, identity: true });
  // One `If-None-Match: *` asks for a 304; sent twice, Node joins them into `*, *`, which is not the
  // field's syntax (`*` or a list of tags), and the server ignores it (a full answer is the safe one).
  const conditions = other.filter(({ name }) => name.toLowerCase() === 'if-none-match');
  const anyTag = conditions.length === 1 && conditions[0]!.value.trim() === '*';
  expectList(
    fuzz,
    response,
    c.auth,
    { query: '', ask: { limit: 100, after: undefined, tag: undefined } },
    head,
    anyTag,
  );
}

const PIECES = [
  '%',
  '%2',
  '%zz',
  '%00',
  '%2F',
  '%25',
  '%C0%AF',
  '%E2%80%AE',
  '%ED%A0%80',
  '..',
  '.',
  '/',
  '//',
  'plants',
  'healthz',
  'docs',
  'index.html',
  '1',
  '-',
  ...'?&=#;+~*@:[]!$\'(),"<>\\^`{|}',
];

/** Request targets to throw at the router and the URL parsers: none may cause a 5xx. */
export const targetArb: fc.Arbitrary<string> = fc.oneof(
  fc.array(fc.constantFrom(...PIECES), { maxLength: 20 }).map((p) => `/${p.join('')}`),
  fc.array(fc.constantFrom(...PIECES), { maxLength: 20 }).map((p) => `/plants/${p.join('')}`),
  fc.array(fc.constantFrom(...PIECES), { maxLength: 20 }).map((p) => `/plants?${p.join('')}`),
  fc.array(fc.constantFrom(...PIECES), { maxLength: 20 }).map((p) => `/docs/static/${p.join('')}`), // @fastify/static
  validTextArb(50).map((text) => `/plants/${bytes(text)}`), // raw UTF-8 in the target
  validTextArb(50).map((text) => `/plants?tag=${bytes(text)}`),
  fc.integer({ min: 1000, max: 20_000 }).map((n) => `/plants/${'1'.repeat(n)}`),
  fc.integer({ min: 1000, max: 20_000 }).map((n) => `/plants?tag=${'a'.repeat(n)}`),
  fc.constantFrom(
    '*',
    'plants',
    'http://127.0.0.1/plants',
    'http://[::1]:1/plants?limit=1',
    'HTTP://X/healthz',
    '//plants',
    '/plants/..%2f..%2fetc%2fpasswd',
    '/%2e%2e/plants',
    '/plants/%2e%2e',
    '/./plants',
    '/plants/.',
    '/plants/1/..',
  ),
);
