// This process and what it started: waiting, the clock, its log lines and arguments, CPU and
// memory of a process from /proc, and what must not outlive a run (children, replica pairs,
// folders), stopped synchronously in one 'exit' handler. That handler runs however the process
// ends (done, an error, SIGINT or SIGTERM through exitOnSignal(), a deadline through exitAfter()),
// where an asynchronous close() would not get the chance.
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ReplicaPair } from '../../test/failover/replica-pair.js';

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** The monotonic clock, in ms: what intervals are measured with. */
export const now = (): number => performance.now();
/** A progress line on stderr, with the time of day (UTC); the results go to stdout. */
export const log = (line: string): void => console.error(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
/** `--name value` of the command line, or `fallback`. */
export const arg = (name: string, fallback: string): string => {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1]! : fallback;
};

/** Waits until `ready()` answers true (a throw or rejection counts as not yet), at most `ms`; then throws. */
export async function until(
  ready: () => boolean | Promise<boolean>,
  ms: number,
  what: string,
  everyMs = 10,
): Promise<void> {
  const deadline = Date.now() + ms;
  let failure = '';
  for (;;) {
    try {
      if (await ready()) return;
    } catch (error) {
      failure = `: ${error instanceof Error ? error.message : JSON.stringify(error)}`;
    }
    if (Date.now() > deadline) throw new Error(`gave up after ${ms} ms waiting for ${what}${failure}`);
    await sleep(everyMs);
  }
}

let tickMs: number | undefined;
/** CPU time (user + system) a process has used so far, in ms (/proc/<pid>/stat, in clock ticks of 1/CLK_TCK s). */
export const cpuMsOf = (pid: number): number => {
  tickMs ??= 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * tickMs;
};
export const loadAverage = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
/** A process's resident memory (VmRSS), in MiB. */
export const rss = (pid: number): number =>
  Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/** Child processes still running when this process ends: SIGKILLed. */
export const children = new Set<ChildProcess>();
/** Replica pairs (test/failover/replica-pair.ts) still up when this process ends: killed, their folder removed. */
export const livePairs = new Set<ReplicaPair>();
/** Folders removed when this process ends. */
export const liveDirs = new Set<string>();

/** SIGCONT then SIGKILL to each server's postmaster, its processes and its runuser wrapper; the pair's folder removed. */
function killPairNow(pair: ReplicaPair): void {
  let table: number[][] = [];
  try {
    table = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' })
      .split('\n')
      .map((line) => line.trim().split(/\s+/).map(Number));
  } catch {
    // without ps, the postmasters alone (their backends leave once the postmaster is gone)
  }
  for (const server of [pair.primary, pair.standby]) {
    const pids: number[] = [];
    try {
      const postmaster = Number(readFileSync(join(server.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      pids.push(postmaster, ...table.filter(([, parent]) => parent === postmaster).map(([child]) => child!));
    } catch {
      // not running
    }
    if (server.child?.pid !== undefined) pids.push(server.child.pid);
    for (const pid of pids)
      for (const signal of ['SIGCONT', 'SIGKILL'] as const) {
        try {
          process.kill(pid, signal);
        } catch {
          // gone already
        }
      }
  }
  rmSync(dirname(pair.primary.dir), { recursive: true, force: true });
}

process.once('exit', () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pair of livePairs) killPairNow(pair);
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});

/** SIGINT or SIGTERM ends the process with code 130 through process.exit, so that the 'exit' handler runs. */
export function exitOnSignal(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));
}

/** The whole harness's bound: past `ms`, the process exits 2 and the 'exit' handler stops everything. */
export function exitAfter(ms: number): void {
  setTimeout(() => {
    log(`the harness ran past ${Math.round(ms / 60_000)} min: stopping everything`);
    process.exit(2);
  }, ms).unref();
}
