import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { PARTS, knockOut, knockedOut, knockoutRefusal } from '../../src/knockouts.js';
import { runCli, startServer } from '../process.js';

// src/knockouts.ts: the cost breakdown's switches (bench/cost.ts). Off unless named, and a part
// named switches off only beside PLANT_STORE_BENCHMARK=1: a production process never loses its
// events, durability or logs to a variable left over from a benchmark.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-knockouts-'));
after(() => rmSync(dir, { recursive: true, force: true }));
after(() => knockOut({})); // this process as it was: nothing off

test('nothing is knocked out unless PLANT_STORE_KNOCKOUT names it, beside PLANT_STORE_BENCHMARK=1', () => {
  assert.deepEqual(knockOut({}), []);
  assert.deepEqual(knockOut({ PLANT_STORE_KNOCKOUT: '', PLANT_STORE_BENCHMARK: '1' }), []);
  assert.deepEqual(knockOut({ PLANT_STORE_KNOCKOUT: 'event-log, metrics', PLANT_STORE_BENCHMARK: '1' }), [
    'metrics',
    'event-log',
  ]);
  assert.ok(knockedOut('event-log') && knockedOut('metrics') && !knockedOut('group-commit'));
  assert.deepEqual(knockOut({ PLANT_STORE_BENCHMARK: '1' }), [], 'each call replaces what was off');
  assert.deepEqual(PARTS.filter(knockedOut), []);
});

test('a part named without PLANT_STORE_BENCHMARK=1, or a name that is no part, is refused and switches nothing off', () => {
  for (const benchmark of [undefined, '', '0', 'true', 'yes']) {
    const env = { PLANT_STORE_KNOCKOUT: 'event-log', PLANT_STORE_BENCHMARK: benchmark };
    assert.match(knockoutRefusal(env) ?? '', /unless PLANT_STORE_BENCHMARK=1 is set too/, String(benchmark));
    assert.throws(() => knockOut(env), /PLANT_STORE_KNOCKOUT=event-log switches parts of the service off/);
  }
  const typo = { PLANT_STORE_KNOCKOUT: 'eventlog,ALL', PLANT_STORE_BENCHMARK: '1' };
  assert.equal(
    knockoutRefusal(typo),
    'PLANT_STORE_KNOCKOUT names no part "eventlog", "ALL": the parts are ' + PARTS.join(', '),
  );
  assert.deepEqual(PARTS.filter(knockedOut), []);
});

test('serve refuses PLANT_STORE_KNOCKOUT without PLANT_STORE_BENCHMARK=1: exit 2, the reason on stderr', async () => {
  const result = await runCli(['serve'], {
    DATABASE_URL: `sqlite:${join(dir, 'refused.db')}`,
    PORT: '0',
    PLANT_STORE_KNOCKOUT: 'event-log',
    PLANT_STORE_BENCHMARK: '',
  });
  assert.equal(result.code, 2, result.stderr);
  assert.equal(
    result.stderr,
    'plant-store: PLANT_STORE_KNOCKOUT=event-log switches parts of the service off for a benchmark; ' +
      'a server refuses it unless PLANT_STORE_BENCHMARK=1 is set too (never in a deployment)\n',
  );
  const fatal = JSON.parse(result.stdout) as { level: number; component: string; msg: string };
  assert.deepEqual(
    [fatal.level, fatal.component, fatal.msg],
    [60, 'settings', 'plant-store could not start: settings failed'],
  );
});

test('serve with PLANT_STORE_KNOCKOUT and PLANT_STORE_BENCHMARK=1 says at warn, at start, what is off', async (t) => {
  const server = await startServer({
    DATABASE_URL: `sqlite:${join(dir, 'benchmark.db')}`,
    PLANT_STORE_KNOCKOUT: 'group-commit,event-log',
    PLANT_STORE_BENCHMARK: '1',
  });
  t.after(() => server.stop());
  const lines = server
    .logs()
    .split('\n')
    .filter((line) => line.includes('PLANT_STORE_KNOCKOUT'))
    .map((line) => JSON.parse(line) as { level: number; knockedOut: string[]; msg: string });
  assert.equal(lines.length, 1, server.logs());
  assert.equal(lines[0]!.level, 40);
  assert.deepEqual(lines[0]!.knockedOut, ['event-log', 'group-commit']);
  assert.equal(
    lines[0]!.msg,
    'PLANT_STORE_KNOCKOUT: event-log, group-commit switched off for a benchmark; ' +
      'this server does not keep what the service promises',
  );
  assert.equal(await server.stop(), 0);
});
