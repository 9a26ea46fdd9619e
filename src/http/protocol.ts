import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, errorBody } from '../errors.js';
import { rawErrorResponse } from './raw-response.js';
import { redactUrl } from './request-log.js';

// The HTTP layer around the routes: request ids, common headers, 404/405, draining, and the
// answers Node would otherwise give itself without the Error body.

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** Echo the caller's X-Request-Id when it is sane; make one otherwise. */
export function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

// Allowed methods of known paths, for 405 answers (RFC 9110 §15.5.6).
const ALLOWED: ReadonlyArray<[RegExp, string]> = [
  [/^\/plants$/, 'GET, HEAD, POST'],
  [/^\/plants\/[^/]*$/, 'DELETE'],
  [/^\/(healthz|readyz|openapi\.json|metrics)$/, 'GET, HEAD'],
];

const allowedMethods = (url: string): string | undefined => {
  const path = url.split('?', 1)[0]!;
  return ALLOWED.find(([pattern]) => pattern.test(path))?.[1];
};

/** 404 for an unknown path; 405 with `Allow` for a known path and the wrong method. */
function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const allowed = allowedMethods(request.url);
  if (allowed !== undefined) {
    const message = `${request.method} is not allowed here; use ${allowed}`;
    return reply.code(405).header('allow', allowed).send(errorBody(405, message));
  }
  return reply.code(404).send(errorBody(404, `no route ${request.method} ${request.url.split('?', 1)[0]!}`));
}

/**
 * A preParsing hook of the API, after authentication: broken percent-encoding in the query is a
 * 400, as it is in the path, rather than text taken literally.
 */
export function queryEncodingHook(
  request: FastifyRequest,
  _reply: unknown,
  payload: Readable,
  done: (error: Error | null, payload?: Readable) => void,
): void {
  const url = request.url;
  const query = url.indexOf('?');
  if (query >= 0 && url.includes('%', query)) {
    try {
      decodeURIComponent(url.slice(query + 1));
    } catch {
      return done(new HttpError(400, 'the query string is not valid percent-encoded UTF-8'));
    }
  }
  done(null, payload);
}

const hasBody = (request: FastifyRequest): boolean => {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
};

export function installProtocol(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });

  // Callback hooks, not async ones: they run on every request, and a promise each is measurable.
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header('x-request-id', request.id);
    if (closing) {
      return done(new HttpError(503, 'the server is shutting down', { 'retry-after': '1', connection: 'close' }));
    }
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      return done(new HttpError(400, 'an HTTP/1.1 request needs a Host header')); // RFC 9112 §3.2
    }
    // 404 and 405 need no body: answer before Fastify would wait to parse one.
    if (request.is404) return void notFound(request, reply);
    done();
  });

  app.addHook('onSend', (request, reply, payload, done) => {
    void reply.header('cache-control', 'no-store').header('x-content-type-options', 'nosniff');
    // Close the connection after this response when draining (a keep-alive socket would hold close()
    // open), or when it answers before the request's body arrived: the unread bytes must not be taken
    // for the next request, nor time out into a second answer.
    if (closing || (request.raw.complete === false && hasBody(request))) void reply.header('connection', 'close');
    done(null, payload);
  });

  app.setNotFoundHandler(notFound);

  // Node answers these itself, with empty bodies, unless someone listens.
  app.server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    const raw = rawErrorResponse(417, 'only "Expect: 100-continue" is supported');
    response.socket?.end(raw);
  });
  app.server.on('connect', (request: IncomingMessage, socket: Socket) => {
    const allowed = allowedMethods(request.url ?? '');
    socket.end(
      allowed === undefined
        ? rawErrorResponse(404, `no route CONNECT ${request.url ?? ''}`)
        : rawErrorResponse(405, `CONNECT is not allowed here; use ${allowed}`, { allow: allowed }),
    );
  });
}

/** Fastify's own routing errors (a URL with bad percent-encoding) get the Error body too. */
export function frameworkErrors(error: Error, request: FastifyRequest, reply: FastifyReply): void {
  // Fastify answers these outside the request lifecycle, so the request log never sees them.
  request.log.info({ method: request.method, url: redactUrl(request.url), status: 400 }, 'request rejected');
  void reply
    .code(400)
    .header('cache-control', 'no-store')
    .header('x-content-type-options', 'nosniff')
    .header('connection', 'close')
    .header('x-request-id', request.id)
    .send(errorBody(400, `the URL is not valid: ${error.message}`));
}
