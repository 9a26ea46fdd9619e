// The figures the benchmarks print: percentiles and medians of samples, and number formats.

/** The nearest-rank percentile (p in 0–100) of values, in their unit; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}
/** The middle of values; of an even count, the mean of the middle two; NaN when there are none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
export const mean = (values: readonly number[]): number => values.reduce((sum, v) => sum + v, 0) / values.length;

/** Infinity is a delivery or event that never arrived (within the wait); it counts in the percentiles as such. */
export const fmt = (n: number, digits = 2): string =>
  n === Infinity ? '∞ (not received)' : Number.isFinite(n) ? n.toFixed(digits) : '—';
export const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—');
/** A duration in whole ms, with thousands separators; '—' when not finite. */
export const ms = (n: number): string => (Number.isFinite(n) ? `${int(n)} ms` : '—');
