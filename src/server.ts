import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { workersStoppedListening } from './cluster.js';
import { startEventSide } from './event-side.js';
import { markDraining } from './http/draining.js';
import { acceptQueued, startDraining, stopListening } from './http/protocol.js';
import { knockedOutParts } from './knockouts.js';
import { followLauncher, settingsSummary, startupStep } from './launch.js';
import { closeRedis, connectRedis } from './redis.js';
import { openStore } from './store/open-store.js';
import { tracing } from './tracing-hooks.js';
import { SecretBox } from './webhooks/secret-box.js';
import { checkStoredWebhooks } from './webhooks/secret-check.js';

/** Lets a cluster worker exit: its channel to the primary would keep the process alive. */
export function releaseProcess(): void {
  if (process.connected) process.disconnect();
}

/**
 * Flushes the tracing exporter, if tracing is on, for at most `ms`; a failure is a warning only.
 * Answers false when the exporter may still be at work (late, or failed midway): its retries and
 * connections would keep the process alive past the grace period, so the caller exits instead.
 */
async function exportLastSpans(app: FastifyInstance, ms: number): Promise<boolean> {
  const current = tracing.current;
  if (current === undefined) return true;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), ms)));
  try {
    const outcome = await Promise.race([current.shutdown().then(() => 'exported' as const), late]);
    if (outcome === 'exported') return true;
    app.log.warn({ waitedMs: ms }, 'tracing: the last spans were not exported in time');
  } catch (error) {
    app.log.warn({ reason: (error as Error).message }, 'tracing: the last spans could not be exported');
  } finally {
    clearTimeout(timer);
  }
  return false;
}

/**
 * Process entry: config → store → app → listen, and a graceful stop on SIGTERM or SIGINT. `env`:
 * the command's environment, which says whether npm started it (launch.ts, followLauncher).
 */
export async function serve(config: Config, env: NodeJS.ProcessEnv): Promise<void> {
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
  // One process cannot hand its port to a successor without refusing connections in between:
  // SIGHUP reloads under `serve --workers N` (cluster.ts); here it is noted and changes nothing. A
  // worker ignores it: its primary reloads, and a SIGHUP to the process group reaches every worker
  // too (without a handler it would kill them).
  process.on('SIGHUP', () => {
    if (cluster.isWorker) return;
    late.app?.log.warn(
      'SIGHUP: a single process does not reload; run `serve --workers N` to reload with SIGHUP, or restart it',
    );
  });
  const store = await startupStep('database', () =>
    openStore(config.database, {
      poolSize: config.databasePoolSize,
      // A lock held elsewhere must never freeze the event loop; statements get spans when tracing is on.
      sqlite: { locks: 'event-loop', tracing: tracing.current },
      onIdleError: (error) =>
        late.app?.log.warn({ reason: error.message }, 'a database connection failed; the pool replaces it'),
      // A multi-host DATABASE_URL (interface 1.3.0): the wait for a primary, and one line per move.
      failoverWaitMs: config.databaseFailoverWaitMs,
      onHostChange: (now, was) => {
        if (was === undefined) return; // the first server found is the start line's business
        late.app?.log.warn({ host: now, was }, `database: writing to ${now}, was ${was}`);
      },
      onHostLeft: (host, why) => late.app?.log.warn({ host, reason: why }, `database: leaving ${host}: ${why}`),
      onHostRefused: (host, why) => {
        if (why === undefined) late.app?.log.info({ host }, `database: ${host} is no longer refused`);
        else late.app?.log.warn({ host, reason: why }, `database: refusing ${host}: ${why}`);
      },
    }),
  );
  let redis: Redis | undefined;
  try {
    const applied = await startupStep('database', () => store.migrate());
    redis = config.redisUrl === null ? undefined : connectRedis(config.redisUrl, late);
    late.app = await buildApp({ config, store, redis });
    if (applied.length > 0) late.app.log.info({ migrations: applied }, 'applied schema migrations');
    const knockedOut = knockedOutParts();
    if (knockedOut.length > 0)
      late.app.log.warn(
        { knockedOut },
        `PLANT_STORE_KNOCKOUT: ${knockedOut.join(', ')} switched off for a benchmark; this server does not keep what the service promises`,
      );
    for (const warning of await store.durabilityWarnings()) late.app.log.warn(warning);
    await startupStep('http', () => late.app!.listen({ port: config.port, host: config.host }));
    // The port bound, which PORT=0 leaves to the kernel.
    const address = late.app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : config.port;
    late.app.log.info(settingsSummary(config, port), 'plant-store serving');
  } catch (error) {
    // A start that fails (port taken, database away) closes what it opened, so the process can exit.
    await late.app?.close().catch(() => {});
    await Promise.all([store.close().catch(() => {}), closeRedis(redis)]);
    throw error;
  }
  const app = late.app;
  // Webhook delivery and the event log's pruning run in every serve process (docs/events.md).
  let requests = 0;
  app.server.on('request', () => {
    requests += 1;
  });
  await checkStoredWebhooks(store, new SecretBox(config.events.secretsKey), config.events.allowPrivateTargets, app.log);
  const events = startEventSide(
    store,
    config.events,
    app.log,
    () => requests,
    (result, seconds) => app.metrics.observeAttempt(result, seconds),
  );
  app.metrics.watchBrokers(events.brokers);

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    const stopBy = Date.now() + config.shutdownGraceMs;
    markDraining(app); // /readyz answers 503 from now on
    // In-flight requests finish; past the grace period the process leaves anyway.
    setTimeout(() => {
      app.log.error({ graceMs: config.shutdownGraceMs }, 'shutdown grace period over; exiting');
      process.exit(1);
    }, config.shutdownGraceMs).unref();
    // The dispatcher stops leasing and finishes what it sent.
    const eventsStopped = events.stop();
    // Connections the kernel already holds are accepted, the listener closes, and open connections
    // are served until none can carry a request (see http/protocol.ts).
    const listenBy = Date.now() + config.shutdownGraceMs / 4;
    acceptQueued(app, config.shutdownGraceMs / 4)
      .then(async () => {
        const closed = stopListening(app);
        await workersStoppedListening(Math.max(0, listenBy - Date.now()));
        // Change-feed streams end only now, since they would hold the drain open: no new connection
        // reaches this process any more, so each client's reconnect (after its `retry:` time) finds
        // another worker or instance, or a refused port it keeps retrying until the server is back,
        // never this draining one. A stream still being set up ends as it starts.
        app.eventStreams.endAll();
        startDraining(app);
        app.log.info({ signal }, 'shutting down: finishing in-flight requests and open connections');
        await closed;
      })
      .then(() => app.close())
      .then(() => eventsStopped)
      .then(() => Promise.all([store.close(), closeRedis(redis)]))
      // The last spans are exported before the process leaves, within what is left of the grace
      // period; a collector that is down or slow costs them, never the stop (docs/tracing.md).
      .then(() => exportLastSpans(app, Math.max(0, stopBy - Date.now() - 500)))
      .then((settled) => {
        app.log.info('stopped cleanly');
        releaseProcess();
        // An export still retrying (a collector away) holds timers and sockets for up to
        // OTEL_EXPORTER_OTLP_TIMEOUT: the stop is done, so the process leaves now, within the grace.
        if (!settled) process.exit();
      })
      .catch((error: unknown) => {
        app.log.error({ err: error }, 'shutdown failed');
        process.exitCode = 1;
        releaseProcess();
      });
  };
  running.stop = stop;
  if (early) stop(early);
  followLauncher(env, (launcher) => {
    app.log.info({ launcher }, 'the process that started this server (npm) has exited; stopping');
    stop('SIGTERM');
  });
}
