import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { HttpError } from '../errors.js';
import type { Principal, TokenAuthenticator } from './authenticator.js';
import type { Scope } from './token.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
  interface FastifyContextConfig {
    /** The scope a route needs; plants:admin satisfies every scope. */
    scope?: Scope;
  }
}

// RFC 6750 §3: the challenge, and the error codes it may carry.
export const REALM = 'Bearer realm="plant-store"';
const challenge = (error: string, extra = ''): Record<string, string> => ({
  'www-authenticate': `${REALM}, error="${error}"${extra}`,
});

const BEARER = /^bearer +([\x21-\x7e]+) *$/i; // RFC 9110 §11.1: the scheme is case-insensitive

function authorizationHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') count += 1;
  }
  return count;
}

/** The onRequest hook of every /plants route: authentication runs before anything else. */
export function authenticateHook(authenticator: TokenAuthenticator) {
  return async function authenticate(request: FastifyRequest): Promise<void> {
    // Node keeps only the first of repeated Authorization headers, so count the raw ones.
    if (authorizationHeaderCount(request.raw.rawHeaders) > 1) {
      throw new HttpError(400, 'send exactly one Authorization header', challenge('invalid_request'));
    }
    const header = request.headers.authorization;
    if (header === undefined) {
      throw new HttpError(401, 'this API needs a bearer token: Authorization: Bearer <token>', {
        'www-authenticate': REALM,
      });
    }
    const token = BEARER.exec(header)?.[1];
    const principal = token === undefined ? undefined : await authenticator.authenticate(token);
    if (!principal) {
      throw new HttpError(
        401,
        'the bearer token is malformed, unknown, expired or revoked',
        challenge('invalid_token'),
      );
    }
    request.principal = principal;
  };
}

/** The preParsing hook: the route's scope, checked before the body is read (RFC 6750 §3.1). */
export async function authorizeHook(request: FastifyRequest, _reply: unknown, payload: Readable): Promise<Readable> {
  const needed = request.routeOptions.config.scope;
  const scopes = request.principal.scopes;
  if (needed && !scopes.has(needed) && !scopes.has('plants:admin')) {
    throw new HttpError(
      403,
      `this operation needs the scope ${needed}`,
      challenge('insufficient_scope', `, scope="${needed}"`),
    );
  }
  return payload;
}
