/**
 * Knock-outs for the cost breakdown (bench/cost.ts, BENCHMARKS.md): `PLANT_STORE_KNOCKOUT`, a
 * comma-separated list of parts to switch off, so that a benchmark can measure what each part
 * costs a request against the same build with everything on. A part knocked out is missing (no
 * log line, no metrics, no events, a commit per write), so a server that has one does not keep
 * what the service promises: `serve` refuses the variable unless `PLANT_STORE_BENCHMARK=1` says
 * the process is a benchmark's too, and says at warn which parts are off (server.ts).
 */
export type Part = 'request-log' | 'metrics' | 'compression' | 'auth-cache' | 'event-log' | 'group-commit';

export const PARTS: readonly Part[] = [
  'request-log',
  'metrics',
  'compression',
  'auth-cache',
  'event-log',
  'group-commit',
];

/** Until knockOut() is called, nothing is off: only `serve` (and the benches that open a store) call it. */
let off: ReadonlySet<Part> = new Set();

const namesIn = (env: NodeJS.ProcessEnv): string[] =>
  (env.PLANT_STORE_KNOCKOUT ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);

/**
 * Why `env`'s PLANT_STORE_KNOCKOUT may not be applied, or undefined: a name that is no part (a typo
 * would measure nothing), or a part without PLANT_STORE_BENCHMARK=1 beside it.
 */
export function knockoutRefusal(env: NodeJS.ProcessEnv): string | undefined {
  const names = namesIn(env);
  const unknown = names.filter((name) => !(PARTS as readonly string[]).includes(name));
  if (unknown.length > 0)
    return `PLANT_STORE_KNOCKOUT names no part "${unknown.join('", "')}": the parts are ${PARTS.join(', ')}`;
  if (names.length > 0 && env.PLANT_STORE_BENCHMARK !== '1')
    return (
      `PLANT_STORE_KNOCKOUT=${names.join(',')} switches parts of the service off for a benchmark; ` +
      'a server refuses it unless PLANT_STORE_BENCHMARK=1 is set too (never in a deployment)'
    );
  return undefined;
}

/**
 * Switches off, for this process, the parts `env`'s PLANT_STORE_KNOCKOUT names, and answers them.
 * Called before the app and the store are made: they read knockedOut() as they are built.
 */
export function knockOut(env: NodeJS.ProcessEnv): readonly Part[] {
  const refusal = knockoutRefusal(env);
  if (refusal !== undefined) throw new Error(refusal);
  const names = namesIn(env);
  off = new Set(PARTS.filter((part) => names.includes(part)));
  return knockedOutParts();
}

/** The parts switched off in this process, in PARTS' order. */
export const knockedOutParts = (): readonly Part[] => PARTS.filter((part) => off.has(part));

/** Whether `part` is switched off for a benchmark. */
export const knockedOut = (part: Part): boolean => off.has(part);
