import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { openStore } from './store/open-store.js';

/** Process entry: config → store → app → listen, and a graceful stop on SIGTERM or SIGINT. */
export async function serve(config: Config): Promise<void> {
  // The app's logger exists only once the app does; a connection may fail before that.
  const late: { app?: FastifyInstance } = {};
  const store = await openStore(config.database, {
    onIdleError: (error) => late.app?.log.warn({ err: error }, 'a database connection failed; the pool replaces it'),
  });
  const applied = await store.migrate();
  const app = await buildApp({ config, store });
  late.app = app;
  if (applied.length > 0) app.log.info({ migrations: applied }, 'applied schema migrations');
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
      .then(() => store.close())
      .then(() => app.log.info('stopped cleanly'))
      .catch((error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
      });
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
