import { spawnSync } from 'node:child_process';

/**
 * The value of one sample of a Prometheus text scrape, e.g. `plant_store_plants 2`, whose labels
 * include `labels`; undefined when there is none.
 */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[2] ?? '').split(',').filter(Boolean);
    if (wanted.every((pair) => have.includes(pair))) return Number(m[3]);
  }
  return undefined;
}

/**
 * Runs Debian's promtool (package `prometheus`) and answers its exit code and output. Missing, it
 * fails the test with how to install it: CI installs it (.ci/run), so a skip would hide a check.
 */
export function promtool(args: string[], input?: string): { code: number; output: string } {
  const run = spawnSync('promtool', args, { input, encoding: 'utf8', timeout: 60_000 });
  if (run.error !== undefined) {
    throw new Error(
      `promtool could not run (${run.error.message}): install it with \`apt-get install prometheus\` ` +
        '(Debian; .ci/run does it), or put the promtool of a Prometheus release on PATH',
    );
  }
  return { code: run.status ?? 1, output: `${run.stdout}${run.stderr}` };
}
