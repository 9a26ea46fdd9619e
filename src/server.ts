import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { openStore } from './store/open-store.js';

/** A Redis client that never holds a request up: when Redis is away, commands fail at once. */
function connectRedis(url: string, late: { app?: FastifyInstance }): Redis {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
  });
  let down = false;
  redis.on('error', (error: Error) => {
    if (!down)
      late.app?.log.warn({ err: error }, 'Redis is unreachable: rate limits are not enforced until it returns');
    down = true;
  });
  redis.on('ready', () => {
    if (down) late.app?.log.info('Redis is reachable again');
    down = false;
  });
  redis.connect().catch(() => {}); // reported by the error listener; ioredis keeps reconnecting
  return redis;
}

/** Process entry: config → store → app → listen, and a graceful stop on SIGTERM or SIGINT. */
export async function serve(config: Config): Promise<void> {
  // The app's logger exists only once the app does; a connection may fail before that.
  const late: { app?: FastifyInstance } = {};
  const store = await openStore(config.database, {
    onIdleError: (error) => late.app?.log.warn({ err: error }, 'a database connection failed; the pool replaces it'),
  });
  const applied = await store.migrate();
  const redis = config.redisUrl === null ? undefined : connectRedis(config.redisUrl, late);
  const app = await buildApp({ config, store, redis });
  late.app = app;
  if (applied.length > 0) app.log.info({ migrations: applied }, 'applied schema migrations');
  for (const warning of await store.durabilityWarnings()) app.log.warn(warning);
  await app.listen({ port: config.port, host: config.host });

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down: finishing in-flight requests');
    // In-flight requests finish; past the grace period the process leaves anyway.
    setTimeout(() => {
      app.log.error({ graceMs: config.shutdownGraceMs }, 'shutdown grace period over; exiting');
      process.exit(1);
    }, config.shutdownGraceMs).unref();
    app
      .close()
      .then(() => Promise.all([store.close(), redis?.quit()]))
      .then(() => {
        app.log.info('stopped cleanly');
        // A cluster worker's channel to its primary would keep the process alive.
        if (process.connected) process.disconnect();
      })
      .catch((error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
