import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { mintToken } from '../../src/auth/token.js';
import type { TestApp } from '../helpers.js';
import type { Caller } from './model.js';

// Authorization headers: every token the service knows, and every way of not presenting one.

export const WHO = ['alice', 'bob', 'admin', 'reader', 'writer'] as const;
export type Who = (typeof WHO)[number];

const SCOPES: Record<Who, string[]> = {
  alice: ['plants:read', 'plants:write'],
  bob: ['plants:read', 'plants:write'],
  admin: ['plants:admin'],
  reader: ['plants:read'],
  writer: ['plants:write'],
};

export interface Principal extends Caller {
  readonly token: string;
  readonly scopes: readonly string[];
}

export interface Principals {
  readonly who: Record<Who, Principal>;
  /** Tokens of the right shape that must not authenticate. */
  readonly dead: readonly string[];
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A token with a real token's id and a valid checksum, but another secret: it passes the shape check. */
function forge(token: string): string {
  const body = token.slice(0, 16) + 'A'.repeat(32);
  let n = crc32(body);
  let checksum = '';
  for (let i = 0; i < 6; i++, n = Math.floor(n / 62)) checksum = BASE62[n % 62]! + checksum;
  return body + checksum;
}

/** Issues the fuzz principals, and tokens that are expired, revoked, unknown and forged. */
export async function issuePrincipals(h: TestApp): Promise<Principals> {
  const who = {} as Record<Who, Principal>;
  for (const name of WHO) {
    const scopes = SCOPES[name];
    const subject = `fuzz-${name}`;
    who[name] = { subject, scopes, admin: scopes.includes('plants:admin'), token: await h.token(subject, scopes) };
  }
  const expired = await h.token('fuzz-expired', SCOPES.admin, 1000);
  h.advance(60_000); // past its expiry on any clock (on PostgreSQL the database's stamped it)
  const revoked = await h.tokens.create({ subject: 'fuzz-revoked', scopes: SCOPES.admin });
  await h.tokens.revoke(revoked.id);
  return { who, dead: [expired, revoked.token, mintToken().token, forge(who.admin.token), forge(who.alice.token)] };
}

export type AuthCase =
  | { readonly kind: 'token'; readonly who: Who; readonly name: string; readonly value: string }
  | { readonly kind: 'none' }
  | { readonly kind: 'invalid'; readonly name: string; readonly value: string }
  | { readonly kind: 'duplicate'; readonly names: readonly string[]; readonly values: readonly string[] };

const nameArb = fc.constantFrom('Authorization', 'authorization', 'AUTHORIZATION', 'aUtHoRiZaTiOn');
const schemeArb = fc.constantFrom('Bearer', 'bearer', 'BEARER', 'bEaReR');
const spacesArb = (min: number): fc.Arbitrary<string> => fc.integer({ min, max: 3 }).map((n) => ' '.repeat(n));

/** A header value carrying `token` the way RFC 6750 allows: any case of the scheme, spaces around. */
const presentArb = (token: string): fc.Arbitrary<string> =>
  fc.tuple(fc.constantFrom('', ' ', '\t'), schemeArb, spacesArb(1), spacesArb(0)).map(([ows, s, sp, tail]) => {
    return `${ows}${s}${sp}${token}${tail}`;
  });

function corruptArb(token: string): fc.Arbitrary<string> {
  return fc.tuple(fc.nat(token.length - 1), fc.constantFrom(...BASE62)).map(([at, c]) => {
    const replacement = token[at] === c ? (c === 'a' ? 'b' : 'a') : c;
    return token.slice(0, at) + replacement + token.slice(at + 1);
  });
}

const latin1Arb = fc
  .array(fc.integer({ min: 0x80, max: 0xff }), { minLength: 1, maxLength: 40 })
  .map((codes) => String.fromCharCode(...codes));

/** A header value that must answer 401 invalid_token (`huge`: up to 12 000 bytes, far below the 16 KiB of headers). */
function invalidValueArb(p: Principals, huge: boolean): fc.Arbitrary<string> {
  const good = p.who.alice.token;
  const badToken = fc.oneof(
    fc.constantFrom(...p.dead),
    corruptArb(good),
    fc.nat(good.length - 1).map((n) => good.slice(0, n)),
    fc.constantFrom(`${good}x`, `${good}=`, `${good},`, good.toLowerCase(), good.toUpperCase()),
    fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1 }),
    latin1Arb,
    fc.integer({ min: 1000, max: huge ? 12_000 : 4000 }).map((n) => 'a'.repeat(n)),
  );
  return fc.oneof(
    fc.tuple(schemeArb, badToken).map(([s, t]) => `${s} ${t}`),
    fc.constantFrom(
      '',
      'Bearer',
      'Bearer ',
      `Bearer\t${good}`,
      `Bearer:${good}`,
      `Bearer=${good}`,
      `Bearer,${good}`,
      `Bearer ${good} extra`,
      `Bearer ${good} ${good}`,
      `Basic ${Buffer.from(`alice:${good}`).toString('base64')}`,
      `Token ${good}`,
      `Bearer${good}`,
      good,
    ),
  );
}

export function authArb(p: Principals): fc.Arbitrary<AuthCase> {
  // Mostly the owners whose plants the model tracks, so that most requests reach the operation.
  const whoArb = fc.oneof(
    { weight: 4, arbitrary: fc.constant<Who>('alice') },
    { weight: 3, arbitrary: fc.constant<Who>('bob') },
    { weight: 2, arbitrary: fc.constant<Who>('admin') },
    fc.constantFrom<Who>('reader', 'writer'),
  );
  const present = fc
    .tuple(whoArb, nameArb)
    .chain(([who, name]) =>
      presentArb(p.who[who].token).map((value) => ({ kind: 'token' as const, who, name, value })),
    );
  return fc.oneof(
    { weight: 30, arbitrary: present },
    { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
    {
      weight: 2,
      arbitrary: fc.record({ kind: fc.constant('invalid' as const), name: nameArb, value: invalidValueArb(p, true) }),
    },
    {
      weight: 1,
      arbitrary: fc
        .array(fc.tuple(nameArb, fc.oneof(presentArb(p.who.admin.token), invalidValueArb(p, false))), {
          minLength: 2,
          maxLength: 3,
        })
        .map((pairs) => ({
          kind: 'duplicate' as const,
          names: pairs.map(([n]) => n),
          values: pairs.map(([, v]) => v),
        })),
    },
  );
}

export function authHeaders(auth: AuthCase): Array<[string, string]> {
  switch (auth.kind) {
    case 'none':
      return [];
    case 'token':
    case 'invalid':
      return [[auth.name, auth.value]];
    case 'duplicate':
      return auth.names.map((name, i) => [name, auth.values[i]!]);
  }
}

export interface AuthFailure {
  readonly status: 400 | 401 | 403;
  readonly challenge: string;
}

const REALM = 'Bearer realm="plant-store"';

/** The answer authentication gives before anything else, or undefined when the caller may go on. */
export function authFailure(auth: AuthCase, p: Principals, scope: string): AuthFailure | undefined {
  switch (auth.kind) {
    case 'none':
      return { status: 401, challenge: REALM };
    case 'invalid':
      return { status: 401, challenge: `${REALM}, error="invalid_token"` };
    case 'duplicate':
      return { status: 400, challenge: `${REALM}, error="invalid_request"` };
    case 'token': {
      const { scopes } = p.who[auth.who];
      if (scopes.includes(scope) || scopes.includes('plants:admin')) return undefined;
      return { status: 403, challenge: `${REALM}, error="insufficient_scope", scope="${scope}"` };
    }
  }
}
