// What a benchmark process started that must not outlive it: stopped synchronously in one 'exit'
// handler, which runs however the process ends (done, an error, SIGINT or SIGTERM through
// process.exit, a deadline), where an asynchronous pair.close() would not get the chance. Shared by
// every harness that starts replica pairs (bench/silent-primary.ts, bench/fleet-writes.ts).
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ReplicaPair } from '../test/failover/replica-pair.js';

export const livePairs = new Set<ReplicaPair>();
export const liveChildren = new Set<ChildProcess>();
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
  for (const child of liveChildren) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const pair of livePairs) killPairNow(pair);
  for (const dir of liveDirs) rmSync(dir, { recursive: true, force: true });
});
