/**
 * Knock-outs for the cost breakdown (bench/cost.ts, BENCHMARKS.md): `PLANT_STORE_KNOCKOUT`, a
 * comma-separated list of parts to switch off, so that a benchmark can measure what each part
 * costs a request against the same build with everything on. Never for production: a part knocked
 * out is missing (no log line, no metrics, no events, a commit per write). Read once, at start.
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

const off = new Set((process.env.PLANT_STORE_KNOCKOUT ?? '').split(',').filter(Boolean));

/** Whether `part` is switched off for a benchmark. */
export const knockedOut = (part: Part): boolean => off.has(part);
