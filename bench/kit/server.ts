// The servers a benchmark runs and the CLI beside them: a child that logs to a file (pinned to cores
// or not), ready by its log; `plant-store <command>` as a process; and the PostgreSQL server a run
// uses. The log goes to a file, as it would in production: a pipe the harness had to drain would
// put the harness's reading on the measured cores, and one left unread would fill and make the
// server hold every log line in memory.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { children, sleep } from './process.js';

/** This checkout's CLI (its dist/: `npm run build` first). */
export const BIN = fileURLToPath(new URL('../../bin/plant-store.js', import.meta.url));
/** The service's line once it listens; group 1 is the port. */
export const LISTENING = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/;

export interface Server {
  readonly url: string;
  readonly port: number;
  /** The server's process (taskset execs node: one pid). */
  readonly child: ChildProcess;
  /** The file the child's stdout (and with `stderrToLog`, its stderr) goes to. */
  readonly log: string;
  /** When the harness saw the ready line (Date.now()). */
  readonly readyAt: number;
  stop(): Promise<void>;
}

export interface StartOptions {
  /** Over this process's environment; a name set to undefined is left out. */
  readonly env?: NodeJS.ProcessEnv;
  /** `taskset -c <cores>`; unpinned when absent. */
  readonly cores?: string;
  /** Matched against the log; its group 1 is the port. Default: LISTENING. */
  readonly ready?: RegExp;
  readonly timeoutMs?: number;
  /** The log file, kept after stop(). Default: a new file in `dir`, removed by stop(). */
  readonly log?: string;
  /** The child's stderr into the log too (default: this process's stderr). */
  readonly stderrToLog?: boolean;
}

/** `node <command>` logging to a file; ready when `ready` matches the log, failed when it exits first or times out. */
export async function start(dir: string, command: string[], options: StartOptions = {}): Promise<Server> {
  const { env = {}, cores, ready = LISTENING, timeoutMs = 60_000, stderrToLog = false } = options;
  const log = options.log ?? join(dir, `child-${children.size}-${Date.now()}.log`);
  const fd = openSync(log, 'w');
  const [file, args] =
    cores === undefined ? [process.execPath, command] : ['taskset', ['-c', cores, process.execPath, ...command]];
  const child = spawn(file, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, stderrToLog ? fd : 'inherit'],
  });
  closeSync(fd);
  children.add(child);
  child.once('exit', () => children.delete(child));
  let exited: number | null | undefined;
  child.once('exit', (code) => (exited = code));
  const deadline = Date.now() + timeoutMs;
  let port: number | undefined;
  while (port === undefined) {
    await sleep(20);
    const out = readFileSync(log, 'utf8');
    const m = ready.exec(out);
    if (m) port = Number(m[1]);
    else if (exited !== undefined) throw new Error(`${command.join(' ')} exited with ${exited}: ${out}`);
    else if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${command.join(' ')} was not ready within ${timeoutMs} ms: ${out}`);
    }
  }
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    child,
    log,
    readyAt: Date.now(),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
      if (options.log === undefined) rmSync(log, { force: true }); // a few hundred megabytes after a long run
    },
  };
}

/** `plant-store serve` (`bin`, default this checkout's) on PORT=0 with `env`; ready at its LISTENING line. */
export const startService = (
  dir: string,
  env: NodeJS.ProcessEnv,
  options: StartOptions & { readonly bin?: string; readonly args?: readonly string[] } = {},
): Promise<Server> =>
  start(dir, [options.bin ?? BIN, 'serve', ...(options.args ?? [])], { ...options, env: { PORT: '0', ...env } });

export interface CliOptions {
  /** The CLI to run (another checkout's bin/plant-store.js); default this checkout's. */
  readonly bin?: string;
  /** Past it the command is killed and the call throws. */
  readonly timeoutMs?: number;
  /** Its stderr on this process's stderr; otherwise captured, and in the error when the command fails. */
  readonly showStderr?: boolean;
}

/** `plant-store <args>` with `env` over this process's environment; answers its stdout, throws when it fails. */
export const cli = (args: string[], env: NodeJS.ProcessEnv = {}, options: CliOptions = {}): string =>
  execFileSync(process.execPath, [options.bin ?? BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', options.showStderr ? 'inherit' : 'pipe'],
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: options.timeoutMs,
  });

/**
 * cli() without blocking this process meanwhile: for a harness whose own event loop must go on
 * serving while the command runs (an in-process proxy the command's connection goes through, a
 * receiver, a sampler). Its stderr is always captured.
 */
export const cliAsync = async (
  args: string[],
  env: NodeJS.ProcessEnv = {},
  options: Omit<CliOptions, 'showStderr'> = {},
): Promise<string> =>
  (
    await promisify(execFile)(process.execPath, [options.bin ?? BIN, ...args], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
      maxBuffer: 1 << 30,
      timeout: options.timeoutMs,
    })
  ).stdout;

const tokenCreate = (subject: string, scopes: string): string[] => [
  'token',
  'create',
  '--subject',
  subject,
  '--scopes',
  scopes,
  '--json',
];
const tokenOf = (json: string): string => (JSON.parse(json) as { token: string }).token;

/** A token from `plant-store token create` on the database of `env`. */
export const mintToken = (
  env: NodeJS.ProcessEnv,
  subject = 'bench',
  scopes = 'plants:read,plants:write',
  options: CliOptions = {},
): string => tokenOf(cli(tokenCreate(subject, scopes), env, options));

/** mintToken() through cliAsync(). */
export const mintTokenAsync = async (
  env: NodeJS.ProcessEnv,
  subject = 'bench',
  scopes = 'plants:read,plants:write',
  options: Omit<CliOptions, 'showStderr'> = {},
): Promise<string> => tokenOf(await cliAsync(tokenCreate(subject, scopes), env, options));

/** Runs `use` on BENCH_DATABASE_URL, or on a throwaway PostgreSQL server started for it and stopped after. */
export async function onBenchPostgres<T>(use: (url: string) => Promise<T>): Promise<T> {
  const given = process.env.BENCH_DATABASE_URL;
  if (given) return use(given);
  const { startThrowawayPostgres } = await import('../../test/support/postgres.js');
  const throwaway = await startThrowawayPostgres();
  try {
    return await use(throwaway.url);
  } finally {
    await throwaway.stop();
  }
}
