import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { startServer } from '../process.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { promtool } from '../support/scrape.js';
import { markdownAnchors } from '../docs/markdown.js';

// The Prometheus rules shipped in deploy/prometheus (docs/monitoring.md#alert-rules): valid for
// Prometheus, their alerts fire, and stay quiet, on the input series their test file gives, and
// every series they read is one a real server exports, with the labels they match on.

const rules = fileURLToPath(new URL('../../deploy/prometheus/plant-store.rules.yml', import.meta.url));
const tests = fileURLToPath(new URL('../../deploy/prometheus/plant-store.rules.test.yml', import.meta.url));
const operations = fileURLToPath(new URL('../../docs/operations.md', import.meta.url));
after(() => stopSharedPostgres());

test('promtool check rules accepts deploy/prometheus/plant-store.rules.yml', () => {
  const { code, output } = promtool(['check', 'rules', rules]);
  assert.equal(code, 0, output);
  assert.match(output, /SUCCESS: 17 rules found/);
});

test('promtool test rules: every alert fires, and stays quiet, as its tests say', () => {
  const { code, output } = promtool(['test', 'rules', tests]);
  assert.equal(code, 0, output);
  assert.match(output, /SUCCESS/);
});

test('every alert has a for, a severity, a summary, a description and a runbook section of docs/operations.md', () => {
  const alerts = readFileSync(rules, 'utf8')
    .split(/^\s*- alert: /m)
    .slice(1);
  assert.equal(alerts.length, 10);
  const sections = markdownAnchors(readFileSync(operations, 'utf8'));
  for (const alert of alerts) {
    const name = alert.split('\n')[0]!;
    // PlantStoreWebhookDisabled fires once, at the change: an hour's window, no `for`.
    if (name !== 'PlantStoreWebhookDisabled') assert.match(alert, /^ {8}for: \d+m$/m, name);
    assert.match(alert, /^ {10}severity: (critical|warning|info)$/m, name);
    assert.match(alert, /^ {10}summary: /m, name);
    assert.match(alert, /^ {10}description: /m, name);
    const runbook = /^ {10}runbook: docs\/operations\.md#(\S+)$/m.exec(alert);
    assert.ok(runbook, `${name} names its runbook`);
    assert.ok(sections.has(runbook[1]!), `${name}: docs/operations.md has a section #${runbook[1]}`);
  }
});

/** The `record:` names and `expr:` texts of a rules file, an expr either on its line or a folded block (`>-`). */
function readRules(text: string): { records: Set<string>; exprs: string[] } {
  const lines = text.split('\n');
  const records = new Set<string>();
  const exprs: string[] = [];
  lines.forEach((line, i) => {
    const record = /^\s*- record: (\S+)$/.exec(line);
    if (record) records.add(record[1]!);
    const expr = /^(\s*)expr: (.*)$/.exec(line);
    if (!expr) return;
    if (!/^[>|]-?$/.test(expr[2]!)) return void exprs.push(expr[2]!);
    const block: string[] = [];
    for (const next of lines.slice(i + 1)) {
      if (next.trim() !== '' && next.search(/\S/) <= expr[1]!.length) break;
      block.push(next.trim());
    }
    exprs.push(block.join(' '));
  });
  return { records, exprs };
}

/** Each series selector of a PromQL expression: its metric name and the label names it matches on. */
function selectors(expr: string): Array<{ name: string; labels: string[] }> {
  const found: Array<{ name: string; labels: string[] }> = [];
  for (const m of expr.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{([^}]*)\})?/g)) {
    const name = m[1]!;
    if (!name.startsWith('plant_store') && name !== 'up') continue; // functions, keywords, `by` labels
    const labels = [...(m[2] ?? '').matchAll(/([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"/g)].map((l) => l[1]!);
    found.push({ name, labels });
  }
  return found;
}

/** Each sample name of a scrape, with the label names its samples carry. */
function scraped(text: string): Map<string, Set<string>> {
  const names = new Map<string, Set<string>>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    if (!m) continue;
    const labels = names.get(m[1]!) ?? new Set<string>();
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_]\w*)="/g)) labels.add(l[1]!);
    names.set(m[1]!, labels);
  }
  return names;
}

test('every series the rules read is exported by a real server, with the labels they match on', async (t) => {
  const { records, exprs } = readRules(readFileSync(rules, 'utf8'));
  // Found by the parsing above, so that a rule it missed does not pass unchecked.
  assert.ok(exprs.length >= 17 && records.size >= 7, `${exprs.length} exprs, ${records.size} records`);

  // PostgreSQL with target_session_attrs, as a multi-host DATABASE_URL is served: the failover's
  // series (plant_store_database_waiting_requests) are exported only then.
  const scratch = await scratchSchema();
  t.after(() => scratch.drop());
  const url = new URL(scratch.url);
  url.searchParams.set('target_session_attrs', 'read-write');
  const server = await startServer({ DATABASE_URL: url.toString() });
  t.after(() => server.stop());
  // A request first: the request series have samples, and so labels, once one is answered.
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  const response = await fetch(`${server.url}/metrics`);
  assert.equal(response.status, 200);
  const exported = scraped(await response.text());

  const missing: string[] = [];
  for (const expr of exprs) {
    for (const { name, labels } of selectors(expr)) {
      if (name.includes(':')) {
        if (!records.has(name)) missing.push(`${name}: no recording rule makes it`);
      } else if (name === 'up') {
        // Prometheus's own series, one per target: the rule must pick Plant Store's targets.
        if (!labels.includes('job')) missing.push('up without a job matcher');
      } else if (!exported.has(name)) {
        missing.push(`${name}: not in the scrape`);
      } else {
        // job and instance are the target's labels, which Prometheus adds.
        for (const label of labels.filter((l) => l !== 'job' && l !== 'instance')) {
          if (!exported.get(name)!.has(label)) missing.push(`${name}{${label}}: no such label in the scrape`);
        }
      }
    }
  }
  assert.deepEqual(missing, []);
  // The check saw the API's series, not only the event side's.
  const read = new Set(exprs.flatMap((expr) => selectors(expr).map((s) => s.name)));
  for (const name of [
    'plant_store_database_up',
    'plant_store_http_requests_total',
    'plant_store_http_request_duration_seconds_bucket',
    'plant_store_overload_refusals_total',
    'plant_store_database_waiting_requests',
    'up',
  ]) {
    assert.ok(read.has(name), `the rules read ${name}`);
  }
});
