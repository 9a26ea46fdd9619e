import cluster, { type Worker } from 'node:cluster';
import pino from 'pino';
import { type Config, ConfigError, loadConfig } from './config.js';
import { followLauncher, readSettingsFile, restartOnlyChanges, settingsSummary, startupStep } from './launch.js';
import { openStore } from './store/open-store.js';

const RESTARTS_PER_MINUTE = 10;

// A graceful stop: a worker answers `Connection: close` only once no worker listens any more.
// Otherwise its clients would reconnect to a worker about to stop listening, and node:cluster
// closes unanswered a connection it is handing to the last worker just as that one stops.
const LISTENER_CLOSED = 'plant-store:listener-closed';
const DRAIN = 'plant-store:drain';

/**
 * In a worker that has stopped listening: tells the primary, and settles when no worker listens
 * any more, or after `limitMs`. Outside a cluster it settles at once.
 */
export function workersStoppedListening(limitMs: number): Promise<void> {
  if (!cluster.isWorker || !process.connected) return Promise.resolve();
  return new Promise((resolve) => {
    const finish = (): void => {
      clearTimeout(timer);
      process.off('message', onMessage);
      resolve();
    };
    const onMessage = (message: unknown): void => void (message === DRAIN && finish());
    const timer = setTimeout(finish, limitMs);
    process.on('message', onMessage);
    process.send?.(LISTENER_CLOSED, undefined, {}, (error) => void (error && finish())); // no primary: drain now
  });
}

/**
 * `serve --workers N`: this process migrates the database once, then runs N workers that share
 * the port (node:cluster hands connections to them), replaces a worker that dies, and on SIGTERM
 * or SIGINT stops them all gracefully, exiting 0 when every worker did.
 *
 * On SIGHUP it reloads: the settings are read again (the environment it started with, and the
 * settings file `settingsFile` when given, read anew), and if they parse, each worker in turn is
 * replaced by a new one (a new build on disk included) started with them: the new worker first,
 * and the old one drained only once the new one listens. Settings that do not parse leave every
 * worker running, and the reason is logged. The restart-only settings (launch.ts,
 * restartOnlyChanges: the port, the address, the number of workers, the database) keep their
 * started values, with a warning naming those the file changed.
 *
 * `workersFlag`: `--workers` was given, and wins over a WORKERS the file sets, at a reload too.
 * `env`: the command's environment, under the settings file's values at a reload too.
 */
export async function runPrimary(
  config: Config,
  {
    env,
    settingsFile,
    workersFlag = false,
  }: { env: NodeJS.ProcessEnv; settingsFile?: string | undefined; workersFlag?: boolean },
): Promise<void> {
  if (config.database.engine === 'sqlite' && config.database.path === ':memory:') {
    throw new ConfigError('sqlite::memory: cannot be shared by several workers; use a file or PostgreSQL');
  }
  const log = pino({ level: config.logLevel }).child({ role: 'primary' });
  /** The settings in force: those it started with, then the last reload's. */
  let current = config;
  const store = await startupStep('database', () => openStore(config.database, { poolSize: 1 }));
  try {
    const applied = await startupStep('database', () => store.migrate());
    if (applied.length > 0) log.info({ migrations: applied }, 'applied schema migrations');
  } finally {
    await store.close();
  }

  let stopping = false;
  let live = 0;
  const notListening = new Set<Worker>();
  const drainWhenNoneListens = (): void => {
    const listening = Object.values(cluster.workers ?? {}).filter(
      (worker) => worker !== undefined && !worker.isDead() && !notListening.has(worker),
    );
    if (stopping && listening.length > 0) return;
    for (const worker of notListening) if (worker.isConnected()) worker.send(DRAIN, undefined, () => {});
    notListening.clear();
  };
  // A worker that stops alone (a signal to it only) drains at once: the others keep listening.
  cluster.on('message', (worker, message) => {
    if (message !== LISTENER_CLOSED) return;
    notListening.add(worker);
    drainWhenNoneListens();
  });
  const restarts: number[] = [];
  /** What the workers are started with beyond this process's environment: the settings file. */
  let workerEnv: Record<string, string> = settingsFile === undefined ? {} : readSettingsFile(settingsFile);
  const startedEnv = workerEnv;
  /** The config a reload reads: as the command line made it at start. */
  const configOf = (fromFile: Record<string, string>): Config => {
    const read = loadConfig({ ...env, ...fromFile }); // parses, or throws why not
    return workersFlag ? { ...read, workers: config.workers } : read;
  };
  const fork = (): Worker => {
    live += 1;
    return cluster.fork(workerEnv);
  };
  /** Workers being replaced by a reload: their exit is expected, not a death to make up for. */
  const retiring = new Set<Worker>();

  cluster.on('exit', (worker, code, signal) => {
    live -= 1;
    notListening.delete(worker);
    if (retiring.delete(worker)) {
      log.info({ worker: worker.process.pid, code, signal }, 'reload: the old worker stopped');
      return;
    }
    if (stopping) {
      drainWhenNoneListens(); // a worker that died listens no more
      if (code !== 0) process.exitCode = 1;
      log.info({ worker: worker.process.pid, code, signal }, 'worker stopped');
      if (live === 0) log.info('all workers stopped');
      return;
    }
    const now = Date.now();
    restarts.push(now);
    while (restarts[0]! < now - 60_000) restarts.shift();
    if (restarts.length > RESTARTS_PER_MINUTE) {
      log.fatal({ restarts: restarts.length }, 'workers keep dying; giving up');
      process.exitCode = 1;
      stop('SIGTERM');
      return;
    }
    log.error({ worker: worker.process.pid, code, signal }, 'a worker died; starting another');
    fork();
  });

  function stop(signal: NodeJS.Signals): void {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: live }, 'stopping workers');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    setTimeout(() => {
      log.error('workers did not stop within the grace period; exiting');
      process.exit(1);
    }, current.shutdownGraceMs + 2000).unref();
  }
  // `on`: a terminal's Ctrl-C or a group kill reaches the primary and the workers alike.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  let reloading = false;
  async function reload(): Promise<void> {
    if (stopping) return;
    if (reloading) {
      log.warn('SIGHUP: a reload is already under way; this one is ignored');
      return;
    }
    let nextEnv: Record<string, string>;
    let next: Config;
    try {
      nextEnv = settingsFile === undefined ? {} : readSettingsFile(settingsFile);
      next = configOf(nextEnv);
    } catch (error) {
      log.error(
        { reason: (error as Error).message },
        'reload refused: the settings do not parse; the workers keep running',
      );
      return;
    }
    // A restart-only setting the file changed keeps its started value (issue: a reload moved the port).
    const kept = restartOnlyChanges(config, next);
    if (kept.length > 0) {
      nextEnv = { ...nextEnv };
      for (const name of kept) {
        if (startedEnv[name] === undefined) delete nextEnv[name];
        else nextEnv[name] = startedEnv[name];
      }
      next = configOf(nextEnv);
      log.warn(
        { settings: kept },
        `reload: ${kept.join(', ')} changed in the settings file; a reload keeps the started value, a restart applies it`,
      );
    }
    reloading = true;
    workerEnv = nextEnv;
    current = next;
    log.level = next.logLevel;
    const old = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
    log.info({ workers: old.length }, 'reload: replacing the workers one at a time');
    try {
      for (const worker of old) {
        if (stopping) return;
        const fresh = fork();
        await new Promise<void>((resolve, reject) => {
          const onListening = (w: Worker): void => {
            if (w !== fresh) return;
            cleanup();
            resolve();
          };
          const onExit = (w: Worker): void => {
            if (w !== fresh) return;
            cleanup();
            reject(new Error('the new worker exited before it listened'));
          };
          const cleanup = (): void => {
            cluster.off('listening', onListening);
            cluster.off('exit', onExit);
          };
          cluster.on('listening', onListening);
          cluster.on('exit', onExit);
        });
        if (worker.isDead()) continue;
        retiring.add(worker);
        const exited = new Promise((resolve) => worker.once('exit', resolve));
        worker.process.kill('SIGTERM');
        await exited;
      }
      log.info({ workers: live }, 'reload done');
    } catch (error) {
      log.error({ reason: (error as Error).message }, 'reload stopped: the remaining old workers keep running');
    } finally {
      reloading = false;
    }
  }
  process.on('SIGHUP', () => void reload());
  followLauncher(env, (launcher) => {
    log.info({ launcher }, 'the process that started this server (npm) has exited; stopping');
    stop('SIGTERM');
  });

  // The start-up line waits for the first worker to listen, to say the port bound (PORT=0 leaves it
  // to the kernel); it is logged once, not again for the workers a reload or a death starts.
  const listening = (_worker: Worker, address: { port: number }): void => {
    cluster.off('listening', listening);
    log.info(settingsSummary(config, address.port), 'started workers');
  };
  cluster.on('listening', listening);
  for (let i = 0; i < config.workers; i++) fork();
}

export const isPrimary = (): boolean => cluster.isPrimary;
