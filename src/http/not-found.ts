import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from '../errors.js';
import type { Cors } from './cors.js';

// The answers for requests no route takes: 404 for an unknown path, 405 with Allow for a known
// path and another method, and with CORS on, OPTIONS.

// Allowed methods of known paths, for 405 answers (RFC 9110 §15.5.6).
const ALLOWED: ReadonlyArray<[RegExp, string]> = [
  [/^\/plants$/, 'GET, HEAD, POST'],
  [/^\/plants\/[^/]+$/, 'DELETE'],
  [/^\/(healthz|readyz|openapi\.json|metrics)$/, 'GET, HEAD'],
  [/^\/webhooks$/, 'GET, HEAD, POST'],
  [/^\/webhooks\/[^/]+$/, 'DELETE, PATCH'],
  [/^\/webhooks\/[^/]+\/deliveries$/, 'GET, HEAD'],
  [/^\/webhooks\/[^/]+\/deliveries\/[^/]+\/attempts$/, 'GET, HEAD'],
  [/^\/webhooks\/[^/]+\/(enable|secret|ping|recover|deliveries\/[^/]+\/retry)$/, 'POST'],
  [/^\/events$/, 'GET'],
];

export const allowedMethods = (url: string, cors: boolean): string | undefined => {
  const path = url.split('?', 1)[0]!;
  const allowed = ALLOWED.find(([pattern]) => pattern.test(path))?.[1];
  // With CORS on, OPTIONS is answered on every known path (a preflight, or 204 with Allow).
  return cors && allowed !== undefined ? `${allowed}, OPTIONS` : allowed;
};

/**
 * 404 for an unknown path; 405 with `Allow` for a known path and the wrong method. With CORS on,
 * an OPTIONS request that is not an allowed origin's preflight gets 204 with `Allow` (RFC 9110
 * §9.3.7) and no CORS headers, so a browser refuses to go on.
 */
export function notFoundHandler(cors: Cors | undefined) {
  return function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const allowed = allowedMethods(request.url, cors !== undefined);
    if (allowed !== undefined && cors !== undefined && request.method === 'OPTIONS') {
      return reply.code(204).header('allow', allowed).send();
    }
    if (allowed !== undefined) {
      const message = `${request.method} is not allowed here; use ${allowed}`;
      return reply.code(405).header('allow', allowed).send(errorBody(405, message));
    }
    const path = request.url.split('?', 1)[0]!;
    // `/plants/` is not `/plants` (RFC 3986 §6.2.4), nor a plant with an empty id: name the path meant.
    const bare = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : undefined;
    const hint =
      bare !== undefined && allowedMethods(bare, false) !== undefined
        ? `; did you mean ${bare}, without the slash?`
        : '';
    return reply.code(404).send(errorBody(404, `no route ${request.method} ${path}${hint}`));
  };
}

/**
 * The router takes `/plants/` for `/plants/{id}` with an empty id, and `/webhooks//enable` alike:
 * a path with an empty id names nothing, so it is an unknown path (404, before authentication).
 */
export function hasEmptyParam(params: unknown): boolean {
  const values = params as Record<string, string>;
  for (const name in values) if (values[name] === '') return true;
  return false;
}
