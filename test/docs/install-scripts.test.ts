import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { userEnv } from './markdown.js';

// `npm ci` and `npm prune` warned "2 packages have install scripts not yet
// covered by allowScripts" (npm 11 runs a dependency's install scripts only when package.json's
// allowScripts allows it). package.json settles each one: better-sqlite3, esbuild and the embedded
// PostgreSQL need theirs; @scarf/scarf's reports the install to scarf.sh, protobufjs's only warns
// about a dependent's version range: denied. Run as npm runs them, on a copy of the manifests
// (`--dry-run --offline`: nothing is fetched or written; the prepare script, which builds dist/,
// is left out of the copy).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const exec = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-install-scripts-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const env = { ...userEnv(), npm_config_cache: join(dir, 'cache'), npm_config_update_notifier: 'false' };
const npm = async (args: string[], cwd: string): Promise<string> => {
  const { stdout, stderr } = await exec('npm', args, { cwd, env, timeout: 60_000 });
  return `${stdout}${stderr}`;
};

test('npm ci and npm prune --omit=dev print no install-scripts warning', { timeout: 120_000 }, async () => {
  const copy = join(dir, 'checkout');
  mkdirSync(join(copy, 'packages/client'), { recursive: true });
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  delete manifest.scripts.prepare;
  writeFileSync(join(copy, 'package.json'), JSON.stringify(manifest, null, 2));
  copyFileSync(join(ROOT, 'package-lock.json'), join(copy, 'package-lock.json'));
  copyFileSync(join(ROOT, 'packages/client/package.json'), join(copy, 'packages/client/package.json'));

  const ci = await npm(['ci', '--dry-run', '--offline', '--no-audit', '--no-fund'], copy);
  assert.match(ci, /added \d+ packages/, ci.slice(-2000));
  assert.doesNotMatch(ci, /install-scripts|allowScripts/, ci.slice(-2000));
  const prune = await npm(['prune', '--omit=dev', '--dry-run', '--offline', '--no-audit', '--no-fund'], copy);
  assert.doesNotMatch(prune, /install-scripts|allowScripts/, prune.slice(-2000));
});

test('npm install-scripts ls finds no dependency whose install script is not reviewed', async () => {
  const out = await npm(['install-scripts', 'ls'], ROOT);
  assert.match(out, /^No packages with unreviewed install scripts\.$/m, out);
});
