import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// src/knockouts.ts: the cost breakdown's switches (bench/cost.ts). Off unless named; a name it does
// not know switches nothing off. Each process reads them once, at start: a child per case.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const knockedOut = (value: string | undefined): unknown => {
  const env = { ...process.env };
  delete env.PLANT_STORE_KNOCKOUT;
  if (value !== undefined) env.PLANT_STORE_KNOCKOUT = value;
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      "const m = await import('./dist/knockouts.js'); console.log(JSON.stringify(m.PARTS.filter(m.knockedOut)))",
    ],
    { cwd: ROOT, env, encoding: 'utf8' },
  );
  return JSON.parse(out);
};

test('nothing is knocked out unless PLANT_STORE_KNOCKOUT names it; unknown names switch nothing off', () => {
  assert.deepEqual(knockedOut(undefined), []);
  assert.deepEqual(knockedOut(''), []);
  assert.deepEqual(knockedOut('event-log,metrics'), ['metrics', 'event-log']);
  assert.deepEqual(knockedOut('eventlog,ALL'), []);
});
