// One wrk run as the benchmarks take it: -t1 -c50 pinned to core 1, with latency percentiles; any
// socket error or non-2xx answer fails the run.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { median } from './stats.js';

/** BENCH_DURATION: the seconds of a run whose caller names none (default 10). */
export const DURATION = Number(process.env.BENCH_DURATION ?? 10);

export interface WrkResult {
  /** Requests sent, each one a fresh id for the create and delete scripts. */
  readonly requests: number;
  readonly rps: number;
  readonly p50: number;
  readonly p99: number;
}

/** `timeout`: wrk's --timeout (its default, 2 s, counts a slower answer as a socket error). */
export async function wrk(
  url: string,
  lua: string,
  seconds = DURATION,
  { timeout }: { readonly timeout?: string } = {},
): Promise<WrkResult> {
  const { stdout: out } = await promisify(execFile)(
    'taskset',
    [
      ...['-c', '1', 'wrk', '-t1', '-c50'],
      ...(timeout === undefined ? [] : ['--timeout', timeout]),
      ...[`-d${seconds}s`, '--latency', '-s', lua, url],
    ],
    { encoding: 'utf8' },
  );
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const socket = /Socket errors: (.*)/.exec(out);
  if (non2xx || socket) throw new Error(`errors during the run against ${url} (${lua}):\n${out}`);
  const ms = (label: string): number => {
    const m = new RegExp(`^\\s+${label}%\\s+([\\d.]+)(us|ms|s)`, 'm').exec(out);
    if (!m) throw new Error(`no ${label}% latency in wrk output:\n${out}`);
    return Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2] as 'us' | 'ms' | 's'];
  };
  return {
    requests: Number(/(\d+) requests in/.exec(out)![1]),
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)![1]),
    p50: ms('50'),
    p99: ms('99'),
  };
}

/** Rounds of one scenario as one figure: the requests summed, the rates and latencies their medians. */
export const combine = (results: WrkResult[]): WrkResult => ({
  requests: results.reduce((sum, r) => sum + r.requests, 0),
  rps: median(results.map((r) => r.rps)),
  p50: median(results.map((r) => r.p50)),
  p99: median(results.map((r) => r.p99)),
});
