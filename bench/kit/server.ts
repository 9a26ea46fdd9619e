// The servers a benchmark runs: a child pinned to cores, logging to a file, ready by its log; and
// the PostgreSQL server a run uses.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { children, sleep } from './process.js';

export interface Server {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** When the harness saw the ready line (Date.now()). */
  readonly readyAt: number;
  stop(): Promise<void>;
}

/** A child pinned to `cores` that logs to a file; ready when `ready` matches the log (its group 1 is the port). */
export async function start(
  dir: string,
  command: string[],
  env: NodeJS.ProcessEnv,
  cores: string,
  ready: RegExp,
  timeoutMs = 60_000,
): Promise<Server> {
  const log = join(dir, `child-${children.size}-${Date.now()}.log`);
  const fd = openSync(log, 'w');
  const child = spawn('taskset', ['-c', cores, process.execPath, ...command], {
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, 'inherit'],
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
    readyAt: Date.now(),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
      rmSync(log, { force: true });
    },
  };
}

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
