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

type Log = pino.Logger;

/** Runs the migrations once, before any worker starts, on a connection of its own. */
async function migrateOnce(config: Config, log: Log): Promise<void> {
  const store = await startupStep('database', () => openStore(config.database, { poolSize: 1 }));
  try {
    const applied = await startupStep('database', () => store.migrate());
    if (applied.length > 0) log.info({ migrations: applied }, 'applied schema migrations');
  } finally {
    await store.close();
  }
}

/**
 * The workers of this primary: forked with the settings in force, replaced when one dies (up to
 * RESTARTS_PER_MINUTE), drained together (none answers `Connection: close` while another still
 * listens), and stopped all at once.
 */
class Workers {
  stopping = false;
  private live = 0;
  private readonly notListening = new Set<Worker>();
  private readonly restarts: number[] = [];
  /** Workers being replaced by a reload: their exit is expected, not a death to make up for. */
  private readonly retiring = new Set<Worker>();

  /** `env`: what workers are started with beyond this process's environment (the settings file). */
  constructor(
    private readonly log: Log,
    public env: Record<string, string>,
    /** The grace period in force: a stop that outlasts it by 2 s exits. */
    private readonly graceMs: () => number,
  ) {
    // A worker that stops alone (a signal to it only) drains at once: the others keep listening.
    cluster.on('message', (worker, message) => {
      if (message !== LISTENER_CLOSED) return;
      this.notListening.add(worker);
      this.drainWhenNoneListens();
    });
    cluster.on('exit', (worker, code, signal) => this.exited(worker, code, signal));
  }

  get count(): number {
    return this.live;
  }

  fork(): Worker {
    this.live += 1;
    return cluster.fork(this.env);
  }

  running(): Worker[] {
    return Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
  }

  stop(signal: NodeJS.Signals): void {
    if (this.stopping) return;
    this.stopping = true;
    this.log.info({ signal, workers: this.live }, 'stopping workers');
    for (const worker of this.running()) worker.process.kill('SIGTERM');
    setTimeout(() => {
      this.log.error('workers did not stop within the grace period; exiting');
      process.exit(1);
    }, this.graceMs() + 2000).unref();
  }

  /** A new worker in the place of `worker`: the new one listens before the old one drains. */
  async replace(worker: Worker): Promise<void> {
    const fresh = this.fork();
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
    if (worker.isDead()) return;
    this.retiring.add(worker);
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.process.kill('SIGTERM');
    await exited;
  }

  private drainWhenNoneListens(): void {
    const listening = this.running().filter((worker) => !this.notListening.has(worker));
    if (this.stopping && listening.length > 0) return;
    for (const worker of this.notListening) if (worker.isConnected()) worker.send(DRAIN, undefined, () => {});
    this.notListening.clear();
  }

  private exited(worker: Worker, code: number, signal: string): void {
    this.live -= 1;
    this.notListening.delete(worker);
    if (this.retiring.delete(worker)) {
      this.log.info({ worker: worker.process.pid, code, signal }, 'reload: the old worker stopped');
      return;
    }
    if (this.stopping) {
      this.drainWhenNoneListens(); // a worker that died listens no more
      if (code !== 0) process.exitCode = 1;
      this.log.info({ worker: worker.process.pid, code, signal }, 'worker stopped');
      if (this.live === 0) this.log.info('all workers stopped');
      return;
    }
    const now = Date.now();
    this.restarts.push(now);
    while (this.restarts[0]! < now - 60_000) this.restarts.shift();
    if (this.restarts.length > RESTARTS_PER_MINUTE) {
      this.log.fatal({ restarts: this.restarts.length }, 'workers keep dying; giving up');
      process.exitCode = 1;
      this.stop('SIGTERM');
      return;
    }
    this.log.error({ worker: worker.process.pid, code, signal }, 'a worker died; starting another');
    this.fork();
  }
}

/**
 * The settings a reload starts the workers with, read anew, or why they do not parse. The
 * restart-only settings the file changed keep their started values (listed in `kept`).
 */
function reloadedSettings(
  started: { readonly config: Config; readonly env: Record<string, string> },
  settingsFile: string | undefined,
  configOf: (fromFile: Record<string, string>) => Config,
): { env: Record<string, string>; config: Config; kept: string[] } {
  let env = settingsFile === undefined ? {} : readSettingsFile(settingsFile);
  let config = configOf(env); // parses, or throws why not
  const kept = restartOnlyChanges(started.config, config);
  if (kept.length > 0) {
    env = { ...env };
    for (const name of kept) {
      if (started.env[name] === undefined) delete env[name];
      else env[name] = started.env[name];
    }
    config = configOf(env);
  }
  return { env, config, kept };
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
  await migrateOnce(config, log);

  /** The settings in force: those it started with, then the last reload's. */
  let current = config;
  const started = { config, env: settingsFile === undefined ? {} : readSettingsFile(settingsFile) };
  const workers = new Workers(log, started.env, () => current.shutdownGraceMs);
  /** The config a reload reads: as the command line made it at start. */
  const configOf = (fromFile: Record<string, string>): Config => {
    const read = loadConfig({ ...env, ...fromFile });
    return workersFlag ? { ...read, workers: config.workers } : read;
  };
  const stop = (signal: NodeJS.Signals): void => workers.stop(signal);
  // `on`: a terminal's Ctrl-C or a group kill reaches the primary and the workers alike.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  let reloading = false;
  async function reload(): Promise<void> {
    if (workers.stopping) return;
    if (reloading) {
      log.warn('SIGHUP: a reload is already under way; this one is ignored');
      return;
    }
    let next: ReturnType<typeof reloadedSettings>;
    try {
      next = reloadedSettings(started, settingsFile, configOf);
    } catch (error) {
      log.error(
        { reason: (error as Error).message },
        'reload refused: the settings do not parse; the workers keep running',
      );
      return;
    }
    if (next.kept.length > 0) {
      log.warn(
        { settings: next.kept },
        `reload: ${next.kept.join(', ')} changed in the settings file; a reload keeps the started value, a restart applies it`,
      );
    }
    reloading = true;
    workers.env = next.env;
    current = next.config;
    log.level = next.config.logLevel;
    const old = workers.running();
    log.info({ workers: old.length }, 'reload: replacing the workers one at a time');
    try {
      for (const worker of old) {
        if (workers.stopping) return;
        await workers.replace(worker);
      }
      log.info({ workers: workers.count }, 'reload done');
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
  for (let i = 0; i < config.workers; i++) workers.fork();
}

export const isPrimary = (): boolean => cluster.isPrimary;
