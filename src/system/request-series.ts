import type { Metric } from 'prom-client';

/** One line of a metric's output, as prom-client's registry reads it. */
interface Value {
  readonly metricName?: string;
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
}

interface Series {
  readonly labels: Readonly<Record<'method' | 'route' | 'status', string>>;
  count: number;
  sum: number;
  /** Observations per bucket, not cumulative; the last slot is above every bound (+Inf). */
  readonly perBucket: number[];
}

/**
 * Answered requests by method, route pattern and status: how many, and a histogram of how long
 * they took. Counted here with plain additions and written out by prom-client's registry like any
 * of its metrics: prom-client's own Counter and Histogram check and hash the labels on every call,
 * which cost about 0.8 µs a request, more than the rest of its accounting (BENCHMARKS.md).
 */
export class RequestSeries {
  private readonly series = new Map<string, Series>();

  constructor(private readonly buckets: readonly number[]) {}

  observe(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${status}`;
    let series = this.series.get(key);
    if (!series) {
      const perBucket = new Array<number>(this.buckets.length + 1).fill(0);
      series = { labels: { method, route, status: String(status) }, count: 0, sum: 0, perBucket };
      this.series.set(key, series);
    }
    series.count += 1;
    series.sum += seconds;
    let bucket = 0;
    while (bucket < this.buckets.length && seconds > this.buckets[bucket]!) bucket += 1;
    series.perBucket[bucket]! += 1;
  }

  /** A counter of the requests, in the shape prom-client's registry writes. */
  counter(name: string, help: string): Metric {
    return this.metric(name, help, 'counter', () =>
      [...this.series.values()].map(({ labels, count }) => ({ labels, value: count })),
    );
  }

  /** The histogram of their durations in seconds, with `_bucket`, `_sum` and `_count` as Prometheus has them. */
  histogram(name: string, help: string): Metric {
    return this.metric(name, help, 'histogram', () => {
      const values: Value[] = [];
      for (const { labels, count, sum, perBucket } of this.series.values()) {
        let cumulative = 0;
        this.buckets.forEach((le, i) => {
          cumulative += perBucket[i]!;
          values.push({ metricName: `${name}_bucket`, labels: { le, ...labels }, value: cumulative });
        });
        values.push({ metricName: `${name}_bucket`, labels: { le: '+Inf', ...labels }, value: count });
        values.push({ metricName: `${name}_sum`, labels, value: sum });
        values.push({ metricName: `${name}_count`, labels, value: count });
      }
      return values;
    });
  }

  private metric(name: string, help: string, type: 'counter' | 'histogram', values: () => Value[]): Metric {
    return {
      name,
      help,
      type,
      aggregator: 'sum',
      // The registry's own name for it: an OpenMetrics registry renames counters on the object.
      get(this: { name: string }): Promise<object> {
        return Promise.resolve({ name: this.name, help, type, aggregator: 'sum', values: values() });
      },
      reset: () => this.series.clear(),
      // What a registry calls on a metric; prom-client types its metrics as its own four classes.
    } as unknown as Metric;
  }
}
