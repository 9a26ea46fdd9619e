import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseRateLimit } from '../../src/config.js';
import { rateLimitText } from '../../src/launch.js';
import { type ServerProcess, startServer } from '../process.js';

// The start-up line said `"rateLimit":"600/60s"` where docs/settings.md says
// the default is `600/1m`. It now spells RATE_LIMIT as the settings do, and what it shows reads
// back as the same limit.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SETTINGS = readFileSync(join(ROOT, 'docs/settings.md'), 'utf8');

const dir = mkdtempSync(join(tmpdir(), 'plant-store-startup-line-'));
let server: ServerProcess | undefined;
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("the start-up line shows the default RATE_LIMIT as docs/settings.md's table writes it", async () => {
  const documented = /^\| `RATE_LIMIT` +\| `([^`]+)` +\|/m.exec(SETTINGS)?.[1];
  assert.equal(documented, '600/1m');
  server = await startServer({ DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: undefined });
  const line = server
    .logs()
    .split('\n')
    .filter((text) => text.startsWith('{'))
    .map((text) => JSON.parse(text) as { msg?: string; rateLimit?: string })
    .find((entry) => entry.msg === 'plant-store serving');
  assert.ok(line, server.logs());
  assert.equal(line.rateLimit, documented);
});

test('the start-up line spells each RATE_LIMIT so that it reads back as the same limit', () => {
  for (const [setting, shown] of [
    ['600/1m', '600/1m'],
    ['600/60s', '600/1m'],
    ['20/30s', '20/30s'],
    ['100/s', '100/1s'],
    ['5/1500ms', '5/1500ms'],
    ['1000/2h', '1000/2h'],
    ['10/1d', '10/1d'],
    ['off', 'off'],
  ] as const) {
    assert.equal(rateLimitText(parseRateLimit(setting)), shown, setting);
    assert.deepEqual(parseRateLimit(shown), parseRateLimit(setting), shown);
  }
});
