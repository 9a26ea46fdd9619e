import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { HttpError } from '../errors.js';
import { Refusal, type TokenAuthenticator } from './authenticator.js';
import type { Principal } from './principal.js';
import type { Scope } from './token.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
  interface FastifyContextConfig {
    /** The scope a route needs; plants:admin satisfies every plants:* scope. */
    scope?: Scope;
  }
}

// RFC 6750 §3: the challenge, and the error codes it may carry.
export const REALM = 'Bearer realm="plant-store"';
const challenge = (error: string, extra = ''): Record<string, string> => ({
  'www-authenticate': `${REALM}, error="${error}"${extra}`,
});

const BEARER = /^bearer +([\x21-\x7e]+) *$/i; // RFC 9110 §11.1: the scheme is case-insensitive

/** The credential of an `Authorization: Bearer <credential>` header; undefined for anything else. */
export const bearerCredential = (header: string | undefined): string | undefined =>
  header === undefined ? undefined : BEARER.exec(header)?.[1];

function authorizationHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') count += 1;
  }
  return count;
}

const INVALID_TOKEN = (refusal: Refusal): HttpError =>
  new HttpError(
    401,
    'the bearer token is malformed, unknown, expired or revoked',
    challenge('invalid_token'),
    refusal.tokenId === undefined ? { refused: refusal.reason } : { refused: refusal.reason, tokenId: refusal.tokenId },
  );

const TOO_MANY_UNKNOWN = (refusal: Refusal): HttpError =>
  new HttpError(
    429,
    'too many unknown bearer tokens from this address; retry later',
    { 'retry-after': String(Math.max(1, Math.ceil((refusal.retryAfterMs ?? 1000) / 1000))) },
    { refused: refusal.reason, tokenId: refusal.tokenId },
  );

type Done = (error?: Error) => void;

/**
 * Where a request may carry a single-use ticket instead of a bearer token (GET /events?ticket=,
 * interface 1.3.0), and how a ticket is spent. Given by the change feed (events/event-tickets.ts).
 */
export interface TicketDoor {
  /** The ticket this request carries where its route takes one; undefined otherwise. May throw an HttpError. */
  ticketOf(request: FastifyRequest): string | undefined;
  /** The principal the ticket stands for, the ticket spent; undefined when it cannot open anything. */
  spend(ticket: string): Promise<Principal | undefined>;
}

const INVALID_TICKET = (): HttpError =>
  new HttpError(
    401,
    'the ticket is unknown, spent, expired, or its token is revoked or expired: ask POST /events/tickets for a new one',
    challenge('invalid_token'),
    { refused: 'ticket' },
  );

/**
 * The onRequest hook of every /plants route: authentication runs before anything else. A callback
 * hook, synchronous while the token is cached: no promise on the hot path.
 */
export function authenticateHook(authenticator: TokenAuthenticator, tickets?: TicketDoor) {
  return function authenticate(request: FastifyRequest, _reply: unknown, done: Done): void {
    // Node keeps only the first of repeated Authorization headers, so count the raw ones.
    if (authorizationHeaderCount(request.raw.rawHeaders) > 1) {
      return done(new HttpError(400, 'send exactly one Authorization header', challenge('invalid_request')));
    }
    const header = request.headers.authorization;
    let ticket: string | undefined;
    try {
      ticket = tickets?.ticketOf(request);
    } catch (error) {
      return done(error as Error);
    }
    if (ticket !== undefined) {
      if (header !== undefined) {
        return done(new HttpError(400, 'send a bearer token or a ticket, not both', challenge('invalid_request')));
      }
      tickets!.spend(ticket).then((principal) => {
        if (principal === undefined) return done(INVALID_TICKET());
        request.principal = principal;
        done();
      }, done);
      return;
    }
    if (header === undefined) {
      return done(
        new HttpError(
          401,
          'this API needs a bearer token: Authorization: Bearer <token>',
          { 'www-authenticate': REALM },
          { refused: 'no token' },
        ),
      );
    }
    const token = bearerCredential(header);
    const found = token === undefined ? new Refusal('malformed') : authenticator.authenticate(token, request.ip);
    const admit = (principal: Principal | Refusal): void => {
      if (principal instanceof Refusal) {
        return done(principal.retryAfterMs === undefined ? INVALID_TOKEN(principal) : TOO_MANY_UNKNOWN(principal));
      }
      request.principal = principal;
      done();
    };
    if (found instanceof Promise) found.then(admit, done);
    else admit(found);
  };
}

/** The preParsing hook: the route's scope, checked before the body is read (RFC 6750 §3.1). */
export function authorizeHook(
  request: FastifyRequest,
  _reply: unknown,
  payload: Readable,
  done: (error: Error | null, payload?: Readable) => void,
): void {
  const refused = authorizationError(request.principal, request.routeOptions.config.scope);
  if (refused) return done(refused);
  done(null, payload);
}

/** The 403 for a principal without the scope an operation needs; undefined when it has it. */
export function authorizationError(principal: Principal, needed: Scope | undefined): HttpError | undefined {
  const scopes = principal.scopes;
  // plants:admin stands for every plants:* scope; the webhooks:* scopes are granted one by one.
  if (!needed || scopes.has(needed) || (needed.startsWith('plants:') && scopes.has('plants:admin'))) return undefined;
  return new HttpError(
    403,
    `this operation needs the scope ${needed}`,
    challenge('insufficient_scope', `, scope="${needed}"`),
    { refused: 'missing scope', scope: needed, tokenId: principal.tokenId, subject: principal.subject },
  );
}
