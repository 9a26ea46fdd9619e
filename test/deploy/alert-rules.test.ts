import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { promtool } from '../support/scrape.js';

// The Prometheus rules shipped in deploy/prometheus (docs/monitoring.md#alert-rules): valid for
// Prometheus, and their alerts fire, and stay quiet, on the input series their test file gives.

const rules = fileURLToPath(new URL('../../deploy/prometheus/plant-store.rules.yml', import.meta.url));
const tests = fileURLToPath(new URL('../../deploy/prometheus/plant-store.rules.test.yml', import.meta.url));

test('promtool check rules accepts deploy/prometheus/plant-store.rules.yml', () => {
  const { code, output } = promtool(['check', 'rules', rules]);
  assert.equal(code, 0, output);
  assert.match(output, /SUCCESS: 7 rules found/);
});

test('promtool test rules: the backlog, stuck-delivery and disabled-webhook alerts fire as their tests say', () => {
  const { code, output } = promtool(['test', 'rules', tests]);
  assert.equal(code, 0, output);
  assert.match(output, /SUCCESS/);
});
