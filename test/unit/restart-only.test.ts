import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { restartOnlyChanges } from '../../src/launch.js';

// The second walkthrough, point 1: which settings a reload keeps as started (the e2e proof of
// PORT is test/e2e/reload-settings.test.ts).

const changes = (started: Record<string, string>, next: Record<string, string>): string[] =>
  restartOnlyChanges(loadConfig(started), loadConfig(next));

test('a reload keeps PORT, HOST, WORKERS and the database DATABASE_URL names; every other setting may change', () => {
  const base = { PORT: '8080', HOST: '127.0.0.1', WORKERS: '2', DATABASE_URL: 'sqlite:data/plants.db' };
  assert.deepEqual(changes(base, { ...base, RATE_LIMIT: '10/s', LOG_LEVEL: 'debug', SHUTDOWN_GRACE: '30s' }), []);
  assert.deepEqual(changes(base, { ...base, PORT: '08080' }), [], 'the same port written otherwise');
  assert.deepEqual(changes(base, { ...base, PORT: '9999', HOST: '0.0.0.0', WORKERS: '3' }), [
    'PORT',
    'HOST',
    'WORKERS',
  ]);
  assert.deepEqual(changes(base, { ...base, DATABASE_URL: 'sqlite:./data/plants.db' }), [], 'the same file');
  assert.deepEqual(changes(base, { ...base, DATABASE_URL: 'sqlite:data/other.db' }), ['DATABASE_URL']);
  assert.deepEqual(changes({ ...base, PORT: '0' }, { ...base, PORT: '0' }), []);
});

test('on PostgreSQL a reload may change who connects and how (a password rotation), not the server or database', () => {
  const url = (text: string): Record<string, string> => ({ DATABASE_URL: text });
  const started = url('postgres://app:old@db.example:5432/plants');
  assert.deepEqual(changes(started, url('postgres://app:new@db.example:5432/plants')), []);
  assert.deepEqual(changes(started, url('postgresql://app2:new@db.example/plants?sslmode=require')), []);
  assert.deepEqual(changes(started, url('postgres://app:old@db.example:5432/plants2')), ['DATABASE_URL']);
  assert.deepEqual(changes(started, url('postgres://app:old@db2.example:5432/plants')), ['DATABASE_URL']);
  assert.deepEqual(changes(started, url('postgres://app:old@db.example:5433/plants')), ['DATABASE_URL']);
  assert.deepEqual(changes(started, url('sqlite:plants.db')), ['DATABASE_URL']);
});
