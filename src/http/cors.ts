import type { FastifyReply, FastifyRequest } from 'fastify';
import type { CorsOrigins } from '../config.js';

// Browser apps on other origins (CORS_ORIGINS; the Fetch standard's CORS protocol; docs/cors.md).
// Written here rather than with @fastify/cors: its hook would have to run before the HTTP layer's
// own onRequest (whose 404/405 answers must carry these headers too), so its preflight answers
// would miss X-Request-Id; Fastify's frameworkErrors answers run no hook at all and need the same
// headers from one place; and with a list of origins it still sends Access-Control-Expose-Headers,
// and answers a preflight 204 with the allowed methods and headers, to an origin not on the list.

/** Every method the API answers; a browser checks the one it wants against this list. */
const METHODS = 'GET, HEAD, POST, PATCH, DELETE';
// Authorization and Content-Type for every operation; X-Request-Id, which the service echoes;
// Last-Event-ID to resume the change feed; If-None-Match for conditional requests (ETags).
const REQUEST_HEADERS = 'Authorization, Content-Type, X-Request-Id, Last-Event-ID, If-None-Match';
/**
 * The response headers a script may read beyond the CORS-safelisted ones (Content-Type,
 * Cache-Control, …): the next page, the request id, the rate limit (@fastify/rate-limit's
 * draft-spec names), the bearer challenge, the entity tag.
 */
export const EXPOSED_HEADERS =
  'Link, X-Request-Id, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, WWW-Authenticate, ETag';
/** How long a browser may reuse a preflight's answer: Chromium's ceiling (Firefox allows a day). */
export const PREFLIGHT_MAX_AGE = 7200;

export class Cors {
  private readonly origins: ReadonlySet<string> | '*';

  constructor(origins: CorsOrigins) {
    this.origins = origins === '*' ? '*' : new Set(origins);
  }

  /** The value of Access-Control-Allow-Origin for this request's Origin, or undefined (no CORS headers). */
  private allowOrigin(request: FastifyRequest): string | undefined {
    const origin = request.headers.origin;
    if (origin === undefined) return undefined; // not a cross-origin request from a browser
    if (this.origins === '*') return '*'; // no credentials are ever allowed, so `*` is enough
    return this.origins.has(origin) ? origin : undefined;
  }

  /**
   * Puts the CORS headers on whatever answer this request gets, errors included. `Vary: Origin`
   * goes on every answer: with or without the other headers, it depends on the Origin sent.
   * No Access-Control-Allow-Credentials: tokens are bearer headers, not cookies.
   */
  decorate(request: FastifyRequest, reply: FastifyReply): void {
    const vary = reply.getHeader('vary');
    void reply.header('vary', vary === undefined ? 'Origin' : `${String(vary)}, Origin`);
    const origin = this.allowOrigin(request);
    if (origin === undefined) return;
    void reply.header('access-control-allow-origin', origin).header('access-control-expose-headers', EXPOSED_HEADERS);
  }

  /**
   * A preflight from an allowed origin is answered 204 with what the API permits, before any
   * authentication or rate limit: the browser sends no credentials with it. This sets that answer
   * up and says so; the caller sends it. Anything else is left to the caller, and an origin not on
   * the list gets no CORS headers, so its browser refuses to go on.
   */
  preflight(request: FastifyRequest, reply: FastifyReply): boolean {
    if (request.method !== 'OPTIONS' || request.headers['access-control-request-method'] === undefined) return false;
    if (this.allowOrigin(request) === undefined) return false;
    void reply
      .code(204)
      .header('access-control-allow-methods', METHODS)
      .header('access-control-allow-headers', REQUEST_HEADERS)
      .header('access-control-max-age', String(PREFLIGHT_MAX_AGE));
    return true;
  }
}
