import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

// The docs run the command as `npx plant-store …` in a checkout. npx links the checkout into its
// cache the first time, and npm runs the package's prepare script for that link: it compiled dist/
// again (5 s), rewriting the files a running server or test loads from. It must compile nothing.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUILT = ['dist/cli.js', 'dist/server.js', 'packages/client/dist/index.js', 'packages/client/dist/wire.js'];
const cache = mkdtempSync(join(tmpdir(), 'plant-store-npx-cache-'));
after(() => rmSync(cache, { recursive: true, force: true }));

// npm_* variables of an enclosing `npm test` must not steer this npx, nor NODE_OPTIONS (tsx) it.
const childEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'),
);

test('the first npx plant-store of a checkout runs the built dist/ and compiles nothing', async () => {
  const stamps = () => BUILT.map((file) => statSync(join(ROOT, file), { bigint: true }).mtimeNs);
  const before = stamps();
  const { stdout, stderr } = await promisify(execFile)('npx', ['plant-store', '--help'], {
    cwd: ROOT,
    // A cache of its own: npx has never seen this checkout, as on a fresh clone.
    env: { ...childEnv, npm_config_cache: cache, npm_config_offline: 'true', npm_config_update_notifier: 'false' },
    timeout: 60_000,
  });
  assert.match(stdout, /^Usage: plant-store <command> \[options\]/);
  assert.doesNotMatch(stderr, /plant-store: /);
  // npx went through its install of the checkout (the step that ran prepare), and dist/ is as it was.
  assert.equal(readdirSync(join(cache, '_npx')).length, 1);
  assert.deepEqual(stamps(), before);
});
