import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import rateLimit from '@fastify/rate-limit';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteOptions } from 'fastify';
import { authenticateHook } from './auth/authenticate.js';
import { TokenAuthenticator } from './auth/authenticator.js';
import type { Config } from './config.js';
import { HttpError, errorBody, errorHandler } from './errors.js';
import { clientErrorHandler } from './http/client-error.js';
import { registerJsonBody } from './http/json-body.js';
import { buildOpenApi } from './http/openapi.js';
import { createValidatorCompiler } from './http/validation.js';
import { plantRoutes } from './plants/plant.routes.js';
import { PlantService } from './plants/plant.service.js';
import type { Store } from './store/store.js';
import { systemRoutes } from './system/system.routes.js';

export interface AppDeps {
  readonly config: Config;
  readonly store: Store;
  /** Milliseconds since the epoch; tests move time forward to expire tokens. */
  readonly clock?: () => number;
}

const REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** Echo the caller's X-Request-Id when it is sane; make one otherwise. */
function requestId(request: IncomingMessage): string {
  const given = request.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

// Allowed methods of the API's paths, for 405 answers (RFC 9110 §15.5.6).
const ALLOWED: ReadonlyArray<[RegExp, string]> = [
  [/^\/plants$/, 'GET, HEAD, POST'],
  [/^\/plants\/[^/]*$/, 'DELETE'],
];

/** 404 for an unknown path; 405 with `Allow` for a known path and the wrong method. */
function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split('?', 1)[0]!;
  const allowed = ALLOWED.find(([pattern]) => pattern.test(path))?.[1];
  if (allowed !== undefined) {
    return reply
      .code(405)
      .header('allow', allowed)
      .send(errorBody(405, `${request.method} is not allowed here; use ${allowed}`));
  }
  return reply.code(404).send(errorBody(404, `no route ${request.method} ${path}`));
}

/** The one constructor of the HTTP app: used by the server, every test and the OpenAPI export. It never listens. */
export async function buildApp({ config, store, clock = Date.now }: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: { level: config.logLevel, redact: { paths: ['req.headers.authorization'], censor: '[redacted]' } },
    bodyLimit: config.bodyLimit,
    genReqId: requestId,
    requestIdHeader: false,
    requestTimeout: config.requestTimeoutMs,
    // Node checks header and request deadlines on this interval; its 30 s default would let a slow client linger.
    http: { headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: 1000 },
    routerOptions: { maxParamLength: 8192 },
    return503OnClosing: false, // its body is not the Error shape; the preClose hook below answers instead
    clientErrorHandler,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(createValidatorCompiler());
  app.setErrorHandler(errorHandler);
  registerJsonBody(app);

  const routes: RouteOptions[] = [];
  app.addHook('onRoute', (route) => void routes.push(route));

  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
    if (closing) throw new HttpError(503, 'the server is shutting down', { 'retry-after': '1', connection: 'close' });
    // 404 and 405 need no body: answer before Fastify would wait to parse one.
    if (request.is404) return notFound(request, reply);
  });
  app.addHook('onSend', async (request, reply) => {
    void reply.header('cache-control', 'no-store').header('x-content-type-options', 'nosniff');
    // Close the connection after this response when draining (a keep-alive socket would hold close()
    // open), or when the request's body has not fully arrived: an answer given early (401, 415, 404)
    // leaves unread bytes that must not be taken for the next request, nor time out into a second answer.
    if (closing || request.raw.complete === false) void reply.header('connection', 'close');
  });

  app.setNotFoundHandler(notFound);

  const authenticator = new TokenAuthenticator(store, clock, config.tokenCacheMs);
  await app.register(async (api) => {
    api.addHook('onRequest', authenticateHook(authenticator));
    if (config.rateLimit) {
      await api.register(rateLimit, {
        max: config.rateLimit.max,
        timeWindow: config.rateLimit.windowMs,
        keyGenerator: (request) => request.principal.tokenId,
        enableDraftSpec: true,
        errorResponseBuilder: (_request, context) =>
          new HttpError(
            429,
            `rate limit of ${context.max} requests exceeded; retry in ${Math.ceil(context.ttl / 1000)} s`,
          ),
      });
    }
    await api.register(plantRoutes(new PlantService(store)));
  });
  // After the API, so that the OpenAPI document it builds sees every route.
  await app.register(systemRoutes({ store, openapi: () => buildOpenApi(routes) }));

  return app;
}
