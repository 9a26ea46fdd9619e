import rateLimit from '@fastify/rate-limit';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyInstance, type RouteOptions } from 'fastify';
import type { Redis } from 'ioredis';
import { API_DESCRIPTION } from './api-document.js';
import { authenticateHook, authorizeHook } from './auth/authenticate.js';
import { TokenAuthenticator } from './auth/authenticator.js';
import { UnknownTokenBudget } from './auth/unknown-token-budget.js';
import { JwtVerifier } from './auth/jwt.js';
import type { Config } from './config.js';
import { HttpError } from './errors.js';
import { clientErrorHandler } from './http/client-error.js';
import { errorHandler } from './http/error-handler.js';
import { isDraining } from './http/draining.js';
import { registerCompression } from './http/compression.js';
import { DatabaseOutage } from './http/outage.js';
import { Cors } from './http/cors.js';
import { apiFrameworkErrors } from './http/bad-url.js';
import { installProtocol, queryEncodingHook, requestId } from './http/protocol.js';
import { registerJsonBody } from './http/json-body.js';
import { EventLoopLag } from './http/overload.js';
import { type LogSink, stdoutLogStream } from './http/log-stream.js';
import { RequestLog } from './http/request-log.js';
import { buildOpenApi } from './http/openapi.js';
import { buildSerializer } from './http/serialization.js';
import { knockedOut } from './knockouts.js';
import { createValidatorCompiler } from './http/validation.js';
import { eventRoutes } from './events/event.routes.js';
import { EventStreams } from './events/event-streams.js';
import { EventTickets, ticketDoor } from './events/event-tickets.js';
import { plantRoutes } from './plants/plant.routes.js';
import { PlantService } from './plants/plant.service.js';
import type { Store } from './store/store.js';
import { Metrics, metricsRoute } from './system/metrics.js';
import { portalRoutes } from './system/portal.routes.js';
import { systemRoutes } from './system/system.routes.js';
import { tracing } from './tracing-hooks.js';
import { SecretBox } from './webhooks/secret-box.js';
import { webhookRoutes } from './webhooks/webhook.routes.js';
import { WebhookService } from './webhooks/webhook.service.js';

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
  const jwt = config.jwt ? new JwtVerifier(config.jwt) : undefined;
  const authenticator = new TokenAuthenticator(
    store,
    clock,
    knockedOut('auth-cache') ? 0 : config.tokenCacheMs,
    jwt,
    new UnknownTokenBudget(clock),
  );
  // An open stream ends once its token would be refused (docs/api.md#the-change-feed): checked
  // through the same cache.
  const eventStreams = new EventStreams((credential) =>
    typeof credential === 'string'
      ? authenticator.accepts(credential)
      : authenticator.acceptsId(credential.tokenId, credential.until),
  );
  const tickets = new EventTickets(store, authenticator, clock);
  const metrics = new Metrics(store, {
    clock,
    openStreams: () => eventStreams.streams.size,
    // Called only once the app exists (at a scrape).
    log: (level, fields, message) => app.log[level](fields, message),
  });
  const cors = config.corsOrigins === null ? undefined : new Cors(config.corsOrigins);
  const app = Fastify({
    logger: {
      stream: logStream,
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization'], censor: '[redacted]' },
    },
    bodyLimit: config.bodyLimit,
    genReqId: requestId,
    logController: new RequestLog(knockedOut('metrics') ? undefined : (...request) => metrics.observe(...request)),
    requestIdHeader: false,
    requestTimeout: config.requestTimeoutMs,
    // request.ip: the connection's address, or X-Forwarded-For's as far as TRUST_PROXY's proxies vouch for it.
    trustProxy: config.trustProxy === null ? false : [...config.trustProxy],
    // Half the shutdown grace period (5 s by default; at most Fastify's 72 s): on SIGTERM an idle connection
    // is closed only once the `Keep-Alive: timeout` it was given has run out, inside the grace.
    keepAliveTimeout: Math.max(1, Math.min(72_000, Math.floor(config.shutdownGraceMs / 2))),
    // Node checks header and request deadlines on this interval; its 30 s default would let a slow client linger.
    // requireHostHeader off: the onRequest hook answers a missing Host with the Error body instead.
    http: { headersTimeout: config.headersTimeoutMs, connectionsCheckingInterval: 1000, requireHostHeader: false },
    routerOptions: { maxParamLength: 8192 },
    return503OnClosing: false, // its body is not the Error shape; installProtocol answers instead
    schemaController: { compilersFactory: { buildSerializer } }, // compiled once per process (http/serialization.ts)
    clientErrorHandler,
    frameworkErrors: apiFrameworkErrors(authenticator, cors),
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.decorate('eventStreams', eventStreams);
  app.decorate('metrics', metrics);
  tracing.current?.instrumentApp(app); // OTEL_EXPORTER_OTLP_ENDPOINT (docs/tracing.md)
  app.setValidatorCompiler(createValidatorCompiler());
  const outage = new DatabaseOutage(store, app.log);
  app.addHook('onClose', (_instance, done) => {
    outage.stop();
    done();
  });
  app.setErrorHandler(errorHandler(outage));
  registerJsonBody(app);

  const routes: RouteOptions[] = [];
  app.addHook('onRoute', (route) => void routes.push(route));

  installProtocol(app, cors);
  // Before every route: @fastify/compress fits each route with its hooks as the route is added.
  if (!knockedOut('compression')) await registerCompression(app);

  await app.register(async (api) => {
    if (config.maxEventLoopDelayMs > 0) {
      // Overload: while the event loop lags, refuse API work at once instead of queueing it.
      const lag = new EventLoopLag(config.pressureSampleMs);
      api.addHook('onClose', (_instance, done) => {
        lag.stop();
        done();
      });
      api.addHook(
        'onRequest',
        lag.guard(config.maxEventLoopDelayMs, () => metrics.overloadRefused()),
      );
    }
    api.addHook('onRequest', authenticateHook(authenticator, ticketDoor(tickets)));
    if (config.rateLimit) {
      await api.register(rateLimit, {
        max: config.rateLimit.max,
        timeWindow: config.rateLimit.windowMs,
        keyGenerator: (request) => request.principal.tokenId,
        ...(redis && { redis, nameSpace: 'plant-store:rate-limit:' }),
        // If Redis is unreachable, serve rather than fail every request; the outage is logged.
        skipOnError: true,
        enableDraftSpec: true,
        errorResponseBuilder: (request, context) =>
          new HttpError(
            429,
            `rate limit of ${context.max} requests exceeded; retry in ${Math.ceil(context.ttl / 1000)} s`,
            {},
            { refused: 'rate limited', tokenId: request.principal.tokenId, subject: request.principal.subject },
          ),
      });
    }
    // After the rate limit, so a token's requests count even when it lacks the scope.
    api.addHook('preParsing', authorizeHook);
    api.addHook('preParsing', queryEncodingHook);
    await api.register(plantRoutes(new PlantService(store)));
    const secrets = new SecretBox(config.events.secretsKey);
    await api.register(webhookRoutes(new WebhookService(store, config.events, secrets, clock)));
    await api.register(eventRoutes(store, config.events, eventStreams, tickets));
  });
  // After the API, so that the OpenAPI document it builds sees every route.
  await app.register(
    systemRoutes({
      store,
      openapi: () => buildOpenApi(routes, API_DESCRIPTION, { publicUrl: config.publicUrl }),
      draining: () => isDraining(app),
    }),
  );
  await app.register(metricsRoute(metrics, config.metricsToken));
  if (config.portal) await app.register(portalRoutes()); // PORTAL=off: no route, so 404 as any unknown path

  return app;
}
