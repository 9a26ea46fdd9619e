import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Socket, Server as NetServer } from 'node:net';
import type { Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, errorBody } from '../errors.js';
import type { Cors } from './cors.js';
import { isClosing, lingerAfterAnswer } from './lingering-close.js';
import { allowedMethods, hasEmptyParam, notFoundHandler } from './not-found.js';
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

/** Whether this answer comes before the request's body has all arrived. */
const answeredEarly = (request: FastifyRequest): boolean => {
  if (request.raw.complete !== false) return false; // light-my-request's requests say nothing
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
};

/** Each app's drain: how it begins, and its open connections (Node lists them only internally). */
const drains = new WeakMap<FastifyInstance, { begin: () => void; sockets: Set<Socket> }>();

export function installProtocol(app: FastifyInstance, cors?: Cors): void {
  const notFound = notFoundHandler(cors);
  // draining (from startDraining(), or app.close()): answers close their connection. closing
  // (app.close() has begun): requests still arriving get 503, since the store may be closing too.
  let draining = false;
  let closing = false;
  const sockets = new Set<Socket>();
  drains.set(app, { begin: () => void (draining = true), sockets });
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  app.addHook('preClose', (done) => {
    draining = true;
    closing = true;
    done();
  });

  // Callback hooks, not async ones: they run on every request, and a promise each is measurable.
  app.addHook('onRequest', (request, reply, done) => {
    void reply.header('x-request-id', request.id);
    cors?.decorate(request, reply); // first, so that every answer below carries the CORS headers
    // A request pipelined after an answer that closes its connection is not run (RFC 9112 §9.6);
    // its answer, queued behind that one, is dropped with the connection.
    if (isClosing(request.raw)) return done(new HttpError(400, 'the connection closes after the answer before'));
    if (closing) {
      return done(new HttpError(503, 'the server is shutting down', { 'retry-after': '1', connection: 'close' }));
    }
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      return done(new HttpError(400, 'an HTTP/1.1 request needs a Host header')); // RFC 9112 §3.2
    }
    // Before the API's hooks: a preflight carries no credentials and does not count toward a rate limit.
    if (cors?.preflight(request, reply)) return void reply.send();
    // 404 and 405 need no body: answer before Fastify would wait to parse one.
    if (request.is404 || hasEmptyParam(request.params)) return void notFound(request, reply);
    done();
  });

  app.addHook('onSend', (request, reply, payload, done) => {
    void reply.header('cache-control', 'no-store').header('x-content-type-options', 'nosniff');
    // Close the connection after this response when draining (the client then sends no more on it,
    // so closing it races nothing), or when it answers before the request's body arrived: the unread
    // bytes must not be taken for the next request, nor time out into a second answer. That close
    // lingers, so that a client still sending gets to read the answer (http/lingering-close.ts).
    if (answeredEarly(request)) {
      void reply.header('connection', 'close');
      lingerAfterAnswer(request.raw);
    } else if (draining) void reply.header('connection', 'close');
    done(null, payload);
  });

  app.setNotFoundHandler(notFound);

  // Node answers these itself, with empty bodies, unless someone listens.
  app.server.on('checkExpectation', (_request: IncomingMessage, response: ServerResponse) => {
    const raw = rawErrorResponse(417, 'only "Expect: 100-continue" is supported');
    response.socket?.end(raw);
  });
  app.server.on('connect', (request: IncomingMessage, socket: Socket) => {
    const allowed = allowedMethods(request.url ?? '', cors !== undefined);
    socket.end(
      allowed === undefined
        ? rawErrorResponse(404, `no route CONNECT ${request.url ?? ''}`)
        : rawErrorResponse(405, `CONNECT is not allowed here; use ${allowed}`, { allow: allowed }),
    );
  });
}

// A graceful stop (docs/api.md#postgresql-failover-and-shutdown), in three steps: acceptQueued(),
// stopListening(), startDraining().
// No request that reaches the server goes unanswered, and no connection is closed while its client
// may still send on it: the kernel would answer that request with a reset, which a load balancer
// turns into a 502 and does not retry for a POST.

/**
 * Settles once the kernel holds no connection the server has not accepted, or after `limitMs`.
 * Node (libuv ≥ 1.45) accepts one connection per turn of the event loop, so under load new
 * connections wait in the listen queue; their clients see them open and have sent a request, and
 * closing the listener would reset every one. A turn that accepted nothing saw the queue empty.
 * Meanwhile answers go out as usual: a `Connection: close` now would send clients back to the queue.
 */
export function acceptQueued(app: FastifyInstance, limitMs: number): Promise<void> {
  const server = app.server;
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    let accepted = true; // unknown for the turn under way: it may have accepted before the call
    const onConnection = (): void => void (accepted = true);
    const finish = (): void => {
      clearTimeout(limit);
      clearImmediate(turn);
      server.off('connection', onConnection);
      resolve();
    };
    const check = (): void => {
      if (!accepted) return finish();
      accepted = false;
      turn = setImmediate(check); // after the next turn's poll, where a queued connection is accepted
    };
    server.on('connection', onConnection);
    let turn = setImmediate(check);
    const limit = setTimeout(finish, limitMs);
  });
}

/**
 * Closes the listener, and only it: http.Server's close() (Node ≥ 19) would also close every idle
 * keep-alive connection at once, whose client may be sending its next request. Settles when the
 * last connection has closed.
 */
export function stopListening(app: FastifyInstance): Promise<void> {
  return new Promise((resolve) => void NetServer.prototype.close.call(app.server, () => resolve()));
}

/**
 * From now on every answer carries `Connection: close`, and its connection closes after it. An
 * idle connection stays until its next request is answered so, its client closes it, or the
 * keep-alive timeout the server advertised (`Keep-Alive: timeout=N`) runs out and Node closes it.
 * What is still idle one keep-alive timeout from now is closed then: a connection that has not
 * sent a byte, or one whose last answer ended after this call without `Connection: close`.
 * Requests in flight finish, bounded by the caller's grace period.
 */
export function startDraining(app: FastifyInstance): void {
  const drain = drains.get(app);
  drain?.begin();
  setTimeout(() => {
    app.server.closeIdleConnections();
    // Node counts a connection that has not sent a byte as awaiting its headers, not as idle.
    for (const socket of drain?.sockets ?? []) if (socket.bytesRead === 0) socket.destroy();
  }, app.server.keepAliveTimeout).unref();
}

/** Fastify's own routing errors (a URL with bad percent-encoding) get the Error body too. */
export function frameworkErrors(error: Error, request: FastifyRequest, reply: FastifyReply): void {
  closeEarlyAnswer(request);
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

/** For the answers no onSend hook sees (Fastify's routing errors): one before the body lingers as it closes. */
export function closeEarlyAnswer(request: FastifyRequest): void {
  if (answeredEarly(request)) lingerAfterAnswer(request.raw);
}
