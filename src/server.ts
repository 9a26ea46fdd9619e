import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { closeRedis, connectRedis } from './redis.js';
import { openStore } from './store/open-store.js';

/** Lets a cluster worker exit: its channel to the primary would keep the process alive. */
export function releaseProcess(): void {
  if (process.connected) process.disconnect();
}

/** Process entry: config → store → app → listen, and a graceful stop on SIGTERM or SIGINT. */
export async function serve(config: Config): Promise<void> {
  // Handlers first: a signal during start-up is held until the server is up, then it drains as
  // usual (Node's default would kill the process mid-start).
  const running: { stop?: (signal: NodeJS.Signals) => void } = {};
  let early: NodeJS.Signals | undefined;
  // `on`, not `once`: the signal may come twice (to the process group, and from a cluster primary).
  const onSignal = (signal: NodeJS.Signals): void => (running.stop ? running.stop(signal) : void (early ??= signal));
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  // The app's logger exists only once the app does; a connection may fail before that.
  const late: { app?: FastifyInstance } = {};
  const store = await openStore(config.database, {
    poolSize: config.databasePoolSize,
    onIdleError: (error) => late.app?.log.warn({ err: error }, 'a database connection failed; the pool replaces it'),
  });
  let redis: Redis | undefined;
  try {
    const applied = await store.migrate();
    redis = config.redisUrl === null ? undefined : connectRedis(config.redisUrl, late);
    late.app = await buildApp({ config, store, redis });
    if (applied.length > 0) late.app.log.info({ migrations: applied }, 'applied schema migrations');
    for (const warning of await store.durabilityWarnings()) late.app.log.warn(warning);
    await late.app.listen({ port: config.port, host: config.host });
  } catch (error) {
    // A start that fails (port taken, database away) closes what it opened, so the process can exit.
    await late.app?.close().catch(() => {});
    await Promise.all([store.close().catch(() => {}), closeRedis(redis)]);
    throw error;
  }
  const app = late.app;

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
      .then(() => Promise.all([store.close(), closeRedis(redis)]))
      .then(() => {
        app.log.info('stopped cleanly');
        releaseProcess();
      })
      .catch((error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
        releaseProcess();
      });
  };
  running.stop = stop;
  if (early) stop(early);
}
