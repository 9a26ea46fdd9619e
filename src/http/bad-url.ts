import type { FastifyReply, FastifyRequest } from 'fastify';
import { authenticateHook, authorizationError } from '../auth/authenticate.js';
import type { TokenAuthenticator } from '../auth/authenticator.js';
import type { Scope } from '../auth/token.js';
import { HttpError, errorBody } from '../errors.js';
import type { Cors } from './cors.js';
import { closeEarlyAnswer, frameworkErrors } from './protocol.js';
import { redactUrl } from './request-log.js';

// The API's paths: authentication runs before anything else there, a broken URL included.
const API_PATH = /^\/(plants|webhooks|events)(\/|$)/;

/** The scope a broken URL on an API path would have needed, judged by its path and method alone. */
function scopeOf(method: string, path: string): Scope {
  if (path.startsWith('/webhooks')) return method === 'GET' || method === 'HEAD' ? 'webhooks:read' : 'webhooks:write';
  return method === 'DELETE' ? 'plants:write' : 'plants:read';
}

/**
 * Fastify's routing errors (a path with malformed percent-encoding, such as `DELETE /plants/%FF`)
 * come before any route, so no hook runs. On the API's paths authentication still comes first
 * (docs/api.md#authentication): an unauthenticated caller gets 401, a token without the scope
 * 403, and only an authorized one learns that its URL is not valid (400). Elsewhere the 400 stands.
 */
export function apiFrameworkErrors(authenticator: TokenAuthenticator, cors?: Cors) {
  const authenticate = authenticateHook(authenticator);
  return function badUrl(error: Error, request: FastifyRequest, reply: FastifyReply): void {
    // No hook runs for these answers: the CORS headers are set here, and a preflight is answered
    // as anywhere else, so that a browser app gets to read the refusal of its request.
    cors?.decorate(request, reply);
    if (cors?.preflight(request, reply)) {
      return void reply
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff')
        .header('x-request-id', request.id)
        .send();
    }
    const path = request.url.split('?', 1)[0]!;
    if (!API_PATH.test(path)) return frameworkErrors(error, request, reply);
    authenticate(request, reply, (refused?: Error) => {
      const scope = scopeOf(request.method, path);
      const rejection = refused ?? authorizationError(request.principal, scope);
      if (rejection === undefined) return frameworkErrors(error, request, reply);
      const { statusCode, message, headers } =
        rejection instanceof HttpError ? rejection : new HttpError(500, 'internal server error');
      request.log.info({ method: request.method, url: redactUrl(request.url), status: statusCode }, 'request rejected');
      closeEarlyAnswer(request);
      void reply
        .code(statusCode)
        .headers(headers)
        .header('cache-control', 'no-store')
        .header('x-content-type-options', 'nosniff')
        .header('connection', 'close')
        .header('x-request-id', request.id)
        .send(errorBody(statusCode, message));
    });
  };
}
