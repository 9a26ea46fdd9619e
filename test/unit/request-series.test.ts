import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Histogram, Registry, type RegistryContentType } from 'prom-client';
import { RequestSeries } from '../../src/system/request-series.js';

// The request counter and latency histogram are counted by RequestSeries, not by prom-client's own
// Counter and Histogram; a scrape must not tell the difference.

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const COUNTER = ['plant_store_http_requests_total', 'HTTP requests answered'] as const;
const HISTOGRAM = ['plant_store_http_request_duration_seconds', 'Time to answer'] as const;

/** A registry writing `contentType`: Prometheus's text format (what /metrics serves) or OpenMetrics. */
function registry(contentType: RegistryContentType): Registry<RegistryContentType> {
  const made = new Registry<RegistryContentType>();
  made.setContentType(contentType);
  return made;
}

for (const contentType of [Registry.PROMETHEUS_CONTENT_TYPE, Registry.OPENMETRICS_CONTENT_TYPE]) {
  test(`a scrape is the same text, line for line, as prom-client's Counter and Histogram write for the same requests (${contentType.split(';')[0]})`, async () => {
    const theirs = registry(contentType);
    const labelNames = ['method', 'route', 'status'];
    const counter = new Counter({ name: COUNTER[0], help: COUNTER[1], labelNames, registers: [theirs] });
    const histogram = new Histogram({
      name: HISTOGRAM[0],
      help: HISTOGRAM[1],
      labelNames,
      buckets: BUCKETS,
      registers: [theirs],
    });
    const ours = registry(contentType);
    const series = new RequestSeries(BUCKETS);
    ours.registerMetric(series.counter(...COUNTER));
    ours.registerMetric(series.histogram(...HISTOGRAM));
    assert.equal(await ours.metrics(), await theirs.metrics(), 'the same before any request');

    // Every bound exactly (a value on a bound is in that bucket), around each, zero and beyond the last.
    const durations = [0, ...BUCKETS, ...BUCKETS.map((b) => b * 0.999), ...BUCKETS.map((b) => b * 1.001), 10.5, 3600];
    const routes: Array<[string, string, number]> = [
      ['GET', '/plants', 200],
      ['POST', '/plants', 409],
      ['DELETE', '/plants/:id', 204],
      ['GET', 'unmatched', 404],
    ];
    durations.forEach((seconds, i) => {
      const [method, route, status] = routes[i % routes.length]!;
      counter.inc({ method, route, status: String(status) });
      histogram.observe({ method, route, status: String(status) }, seconds);
      series.observe(method, route, status, seconds);
    });
    const text = await ours.metrics();
    assert.equal(text, await theirs.metrics());
    assert.match(text, /^plant_store_http_requests_total\{method="GET",route="\/plants",status="200"\} \d+/m);
    assert.match(
      text,
      /^plant_store_http_request_duration_seconds_bucket\{le="\+Inf",method="GET",route="unmatched",status="404"\} \d+/m,
    );
  });
}

test('each observation lands in the first bucket whose bound it does not exceed', async () => {
  const series = new RequestSeries([1, 2]);
  const registry = new Registry();
  registry.registerMetric(series.histogram('h', 'help'));
  for (const seconds of [0.5, 1, 1.5, 2, 3]) series.observe('GET', '/plants', 200, seconds);
  const text = await registry.metrics();
  const value = (le: string): string | undefined =>
    new RegExp(`^h_bucket\\{le="${le.replace('+', '\\+')}",[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1];
  assert.equal(value('1'), '2');
  assert.equal(value('2'), '4');
  assert.equal(value('+Inf'), '5');
  assert.match(text, /^h_sum\{method="GET",route="\/plants",status="200"\} 8$/m);
  assert.match(text, /^h_count\{method="GET",route="\/plants",status="200"\} 5$/m);
});
