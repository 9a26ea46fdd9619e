import { hostLabel, parsePostgresUrl } from './wire/postgres-url.js';
import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Config } from './config.js';
import { ConfigError, describeDatabase } from './config.js';
import pino from 'pino';
import { tracing } from './tracing-hooks.js';

/**
 * What `serve` needs around the server itself: the settings file that a reload reads again, the
 * start-up line's summary of the settings, and the launcher's lifetime.
 */

const LINE = /^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$/;

/**
 * A settings file: `NAME=value` lines (the format of `.env` files and of Node's `--env-file`),
 * `#` comments and blank lines ignored, a value optionally in single or double quotes. Returns the
 * values; a line that is none of these is a ConfigError naming the file and line.
 */
export function readSettingsFile(path: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read the settings file ${path}: ${(error as Error).message}`);
  }
  const values: Record<string, string> = {};
  text.split(/\r?\n/).forEach((line, index) => {
    if (/^\s*(#.*)?$/.test(line)) return;
    const match = LINE.exec(line);
    // The line is not repeated: it may hold a secret, and the message reaches the log.
    if (match === null)
      throw new ConfigError(`${path}:${index + 1}: expected NAME=value (a name of letters, digits and _)`);
    const raw = match[2]!;
    const quoted = /^(["'])(.*)\1$/.exec(raw);
    values[match[1]!] = quoted ? quoted[2]! : raw.replace(/\s+#.*$/, '');
  });
  return values;
}

/**
 * The database a DATABASE_URL names, without who connects and how: the SQLite path, or the
 * PostgreSQL server (host, port, or the `host` parameter's socket folder) and database name.
 */
export function databaseIdentity(database: Config['database']): string {
  if (database.engine === 'sqlite')
    return `sqlite:${database.path === ':memory:' ? database.path : resolve(database.path)}`;
  try {
    const url = parsePostgresUrl(database.url);
    return `postgres://${url.hosts.map(hostLabel).join(',')}/${url.database || url.user}`;
  } catch {
    return 'postgres (an unparsable URL)'; // never the URL itself: it may hold a password
  }
}

/**
 * The settings that a reload of `serve --workers N` keeps at their started values, among those that
 * differ between the started config and the one the reload read (docs/operations.md, "Reload").
 * Every other setting follows the reload.
 */
export function restartOnlyChanges(started: Config, next: Config): string[] {
  const changed: string[] = [];
  // The primary holds the listening socket and hands its connections to the workers: a worker on
  // another port or address would take the service off the one its clients and load balancer use.
  if (next.port !== started.port) changed.push('PORT');
  if (next.host !== started.host) changed.push('HOST');
  // The primary starts the workers; a reload replaces each one by one.
  if (next.workers !== started.workers) changed.push('WORKERS');
  // The primary migrated this database, and during a reload old and new workers serve side by side:
  // they would write to two stores. Who connects (user, password) and how (parameters) may change.
  if (databaseIdentity(next.database) !== databaseIdentity(started.database)) changed.push('DATABASE_URL');
  return changed;
}

/** RATE_LIMIT as docs/settings.md spells it (`600/1m`, `20/30s`, `off`), in the window's largest whole unit. */
export function rateLimitText(rateLimit: Config['rateLimit']): string {
  if (rateLimit === null) return 'off';
  const units: ReadonlyArray<readonly [string, number]> = [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ];
  const [unit, ms] = units.find(([, size]) => rateLimit.windowMs % size === 0) ?? ['ms', 1];
  return `${rateLimit.max}/${rateLimit.windowMs / ms}${unit}`;
}

/**
 * The start-up line's fields: what an operator checks first (never a secret). `port`: the port
 * bound, when known (PORT=0 asks the kernel for any free one).
 */
export function settingsSummary(config: Config, port = config.port): Record<string, unknown> {
  let redis: string | null = null;
  if (config.redisUrl !== null) {
    try {
      const url = new URL(config.redisUrl);
      redis = `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    } catch {
      redis = 'redis (an unparsable URL)';
    }
  }
  return {
    engine: config.database.engine,
    database: describeDatabase(config.database),
    redis,
    rateLimit: rateLimitText(config.rateLimit),
    workers: config.workers,
    webhookDelivery: config.events.delivery ? 'on' : 'off',
    // The brokers destinations may publish to, each URL without its password.
    ...(config.events.brokers.length > 0 && {
      brokers: config.events.brokers.map((b) => `${b.name}=${b.shown} (allow ${b.allow})`).join(', '),
    }),
    // WEBHOOK_ALLOW_PRIVATE=1 is for development: a server started with it says so.
    ...(config.events.allowPrivateTargets
      ? { webhookAllowPrivate: 'on: http:// and private addresses are allowed (development only)' }
      : {}),
    portal: config.portal ? 'on' : 'off',
    // Where spans are exported (OTEL_EXPORTER_OTLP_ENDPOINT, docs/tracing.md), or off.
    tracing: tracing.current?.exportsTo ?? 'off',
    host: config.host,
    port,
  };
}

/**
 * Started by npm or npx (`npm start`, `npx plant-store serve`), the server lives as long as its
 * launcher: npm passes SIGTERM and SIGINT to its child, but `npx` runs the command through a shell
 * that does not pass them on, and nothing passes SIGHUP. When the launcher is gone (this process
 * was handed to another parent), `onGone` runs, once: the caller stops as on SIGTERM. A server
 * started directly (`node bin/plant-store.js serve`, a process manager) is not watched; `env` is the
 * command's environment, where npm and npx set `npm_command`.
 */
export function followLauncher(env: NodeJS.ProcessEnv, onGone: (launcherPid: number) => void): void {
  if (cluster.isWorker || env.npm_command === undefined) return;
  const launcher = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === launcher) return;
    clearInterval(timer);
    onGone(launcher);
  }, 250);
  timer.unref();
}

/** What failed to start: a log reader filters on it. */
export type Component = 'settings' | 'database' | 'http' | 'server';

/** A start-up step that failed, named by the component it concerns. */
export class StartupError extends Error {
  constructor(
    readonly component: Component,
    cause: unknown,
  ) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/** Runs one start-up step; its failure becomes a StartupError naming `component`. */
export async function startupStep<T>(component: Component, work: () => T | Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw error instanceof StartupError ? error : new StartupError(component, error);
  }
}

/**
 * The one JSON line on stdout (the log's stream and shape) that says a start failed: the component,
 * the reason, and the error's code when it has one. The command still exits non-zero, and says it on stderr.
 */
export function logStartupFailure(error: unknown, level = 'info'): void {
  const component: Component =
    error instanceof StartupError ? error.component : error instanceof ConfigError ? 'settings' : 'server';
  // Settings that do not parse may be the log level itself: their line is written whatever it says.
  if (component === 'settings') level = 'info';
  // The first system error code down the cause chain (a store wraps the socket's error in its own).
  let code: string | undefined;
  for (let at: unknown = error; code === undefined && at instanceof Error; at = at.cause)
    code = (at as NodeJS.ErrnoException).code;
  const reason = error instanceof Error ? error.message : String(error);
  pino({ level }, pino.destination({ fd: 1, sync: true })).fatal(
    { component, reason, ...(code === undefined ? {} : { code }) },
    `plant-store could not start: ${component} failed`,
  );
}
