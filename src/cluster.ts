import cluster, { type Worker } from 'node:cluster';
import pino from 'pino';
import { type Config, ConfigError } from './config.js';
import { openStore } from './store/open-store.js';

const RESTARTS_PER_MINUTE = 10;

/**
 * `serve --workers N`: this process migrates the database once, then runs N workers that share
 * the port (node:cluster hands connections to them), replaces a worker that dies, and on SIGTERM
 * or SIGINT stops them all gracefully, exiting 0 when every worker did.
 */
export async function runPrimary(config: Config): Promise<void> {
  if (config.database.engine === 'sqlite' && config.database.path === ':memory:') {
    throw new ConfigError('sqlite::memory: cannot be shared by several workers; use a file or PostgreSQL');
  }
  const log = pino({ level: config.logLevel }).child({ role: 'primary' });
  const store = await openStore(config.database, { poolSize: 1 });
  try {
    const applied = await store.migrate();
    if (applied.length > 0) log.info({ migrations: applied }, 'applied schema migrations');
  } finally {
    await store.close();
  }

  let stopping = false;
  let live = 0;
  const restarts: number[] = [];
  const fork = (): Worker => {
    live += 1;
    return cluster.fork();
  };

  cluster.on('exit', (worker, code, signal) => {
    live -= 1;
    if (stopping) {
      if (code !== 0) process.exitCode = 1;
      log.info({ pid: worker.process.pid, code, signal }, 'worker stopped');
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
    log.error({ pid: worker.process.pid, code, signal }, 'a worker died; starting another');
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
    }, config.shutdownGraceMs + 2000).unref();
  }
  // `on`: a terminal's Ctrl-C or a group kill reaches the primary and the workers alike.
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  for (let i = 0; i < config.workers; i++) fork();
  log.info({ workers: config.workers, port: config.port }, 'started workers');
}

export const isPrimary = (): boolean => cluster.isPrimary;
