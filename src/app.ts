import rateLimit from '@fastify/rate-limit';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify';
import type { Redis } from 'ioredis';
import { authenticateHook, authorizeHook } from './auth/authenticate.js';
import { TokenAuthenticator } from './auth/authenticator.js';
import { JwtVerifier } from './auth/jwt.js';
import type { Config } from './config.js';
import { HttpError, errorHandler } from './errors.js';
import { clientErrorHandler } from './http/client-error.js';
import { frameworkErrors, installProtocol, queryEncodingHook, requestId } from './http/protocol.js';
import { registerJsonBody } from './http/json-body.js';
import { EventLoopLag } from './http/overload.js';
import { type LogSink, stdoutLogStream } from './http/log-stream.js';
import { RequestLog } from './http/request-log.js';
import { buildOpenApi } from './http/openapi.js';
import { createValidatorCompiler } from './http/validation.js';
import { plantRoutes } from './plants/plant.routes.js';
import { PlantService } from './plants/plant.service.js';
import type { Store } from './store/store.js';
import { Metrics, metricsRoute } from './system/metrics.js';
import { systemRoutes } from './system/system.routes.js';

export interface AppDeps {
  readonly config: Config;
  readonly store: Store;
  /** Milliseconds since the epoch; tests move time forward to expire tokens. */
  readonly clock?: () => number;
  /** Shared rate-limit counters (REDIS_URL); without it each process counts alone. */
  readonly redis?: Redis | undefined;
  /** Where the log lines go; stdout, a turn's lines in one write, unless a test collects them. */
  readonly logStream?: LogSink;
}

/** The one constructor of the HTTP app: used by the server, every test and the OpenAPI export. It never listens. */
export async function buildApp({
  config,
  store,
  clock = Date.now,
  redis,
  logStream = stdoutLogStream(),
}: AppDeps): Promise<FastifyInstance> {
  const metrics = new Metrics(store);
  const app = Fastify({
    logger: {
      stream: logStream,
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization'], censor: '[redacted]' },
    },
    bodyLimit: config.bodyLimit,
    genReqId: requestId,
    logController: new RequestLog((...request) => metrics.observe(...request)),
    requestIdHeader: false,
    requestTimeout: config.requestTimeoutMs,
    // Node checks header and request deadlines on this interval; its 30 s default would let a slow client linger.
    // requireHostHeader off: the onRequest hook answers a missing Host with the Error body instead.
    http: { headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: 1000, requireHostHeader: false },
    routerOptions: { maxParamLength: 8192 },
    return503OnClosing: false, // its body is not the Error shape; installProtocol answers instead
    clientErrorHandler,
    frameworkErrors,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(createValidatorCompiler());
  app.setErrorHandler(errorHandler);
  registerJsonBody(app);

  const routes: RouteOptions[] = [];
  app.addHook('onRoute', (route) => void routes.push(route));

  installProtocol(app);

  const jwt = config.jwt ? new JwtVerifier(config.jwt) : undefined;
  const authenticator = new TokenAuthenticator(store, clock, config.tokenCacheMs, jwt);
  await app.register(async (api) => {
    if (config.maxEventLoopDelayMs > 0) {
      // Overload: while the event loop lags, refuse API work at once instead of queueing it.
      const lag = new EventLoopLag(config.pressureSampleMs);
      api.addHook('onClose', (_instance, done) => {
        lag.stop();
        done();
      });
      api.addHook('onRequest', lag.guard(config.maxEventLoopDelayMs));
    }
    api.addHook('onRequest', authenticateHook(authenticator));
    if (config.rateLimit) {
      await api.register(rateLimit, {
        max: config.rateLimit.max,
        timeWindow: config.rateLimit.windowMs,
        keyGenerator: (request) => request.principal.tokenId,
        ...(redis && { redis, nameSpace: 'plant-store:rate-limit:' }),
        // If Redis is unreachable, serve rather than fail every request; the outage is logged.
        skipOnError: true,
        enableDraftSpec: true,
        errorResponseBuilder: (_request, context) =>
          new HttpError(
            429,
            `rate limit of ${context.max} requests exceeded; retry in ${Math.ceil(context.ttl / 1000)} s`,
          ),
      });
    }
    // After the rate limit, so a token's requests count even when it lacks the scope.
    api.addHook('preParsing', authorizeHook);
    api.addHook('preParsing', queryEncodingHook);
    await api.register(plantRoutes(new PlantService(store)));
  });
  // After the API, so that the OpenAPI document it builds sees every route.
  await app.register(systemRoutes({ store, openapi: () => buildOpenApi(routes) }));
  await app.register(metricsRoute(metrics, config.metricsToken));

  return app;
}
