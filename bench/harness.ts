// What the benchmark scripts share: the children they start (stopped however the process ends),
// a child started pinned to cores and ready by its log, CPU and memory of a process from /proc,
// percentiles, number formats, and the PostgreSQL server a run uses.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, openSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

// Whatever this file started and is still running when the process ends, fails or is interrupted,
// is stopped (bench.ts keeps its own children the same way).
export const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of children) child.kill('SIGKILL');
});

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** CPU time (user + system) a process has used so far, in ms (/proc/<pid>/stat, clock ticks of 10 ms). */
export const cpuMsOf = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
export const loadAverage = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
export const rss = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** The nearest-rank percentile (p in 0–100) of values, in their unit; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
export const median = (values: number[]): number => percentile(values, 50);

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

/** Infinity is a delivery or event that never arrived (within the wait); it counts in the percentiles as such. */
export const fmt = (n: number, digits = 2): string =>
  n === Infinity ? '∞ (not received)' : Number.isFinite(n) ? n.toFixed(digits) : '—';
export const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—');

/** Runs `use` on BENCH_DATABASE_URL, or on a throwaway PostgreSQL server started for it and stopped after. */
export async function onBenchPostgres<T>(use: (url: string) => Promise<T>): Promise<T> {
  const given = process.env.BENCH_DATABASE_URL;
  if (given) return use(given);
  const { startThrowawayPostgres } = await import('../test/support/postgres.js');
  const throwaway = await startThrowawayPostgres();
  try {
    return await use(throwaway.url);
  } finally {
    await throwaway.stop();
  }
}
