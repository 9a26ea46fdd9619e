import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Fastify from 'fastify';

// The Node.js versions the project claims (package.json's `engines`, printed in the README) are
// versions every package of the installed tree accepts, so `npm ci` installs without an
// EBADENGINE warning on each of them; and on this one it does (issue "every printed step works",
// 17: cookie@2 and content-disposition@3 wanted Node.js 22). The two packages are pinned to their
// previous majors by `overrides`; their dependents' calls work with them.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const requireHere = createRequire(import.meta.url);
const semver = requireHere('semver') as {
  subset(sub: string, dom: string): boolean;
  satisfies(version: string, range: string): boolean;
};

interface LockEntry {
  readonly version?: string;
  readonly engines?: { readonly node?: string };
}
const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>;
};
const claimed = manifest.engines.node;

/** The major version of the package a resolved module file belongs to. */
function majorOf(file: string): string {
  for (let at = dirname(file); at !== dirname(at); at = dirname(at)) {
    if (existsSync(join(at, 'package.json')) && basename(dirname(at)) === 'node_modules') {
      return (JSON.parse(readFileSync(join(at, 'package.json'), 'utf8')) as { version: string }).version.split('.')[0]!;
    }
  }
  throw new Error(`no package.json above ${file}`);
}

const dir = mkdtempSync(join(tmpdir(), 'plant-store-engines-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('every package of the tree accepts every Node.js version package.json claims, and this one is claimed', () => {
  assert.equal(lock.packages['']?.engines?.node, claimed, 'package-lock.json is up to date with package.json');
  const refusing = Object.entries(lock.packages)
    .filter(([path, entry]) => path !== '' && entry.engines?.node !== undefined)
    .filter(([, entry]) => !semver.subset(claimed, entry.engines!.node!))
    .map(([path, entry]) => `${path}@${entry.version}: ${entry.engines!.node}`);
  assert.deepEqual(refusing, [], `claimed: ${claimed}`);
  assert.ok(semver.satisfies(process.version, claimed), `${process.version} is within ${claimed}`);
});

test('the README says the versions package.json claims, and which one is tested', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  assert.ok(readme.includes(`\`${claimed}\``), `README.md prints the engines range \`${claimed}\``);
  const tested = `tested on Node.js ${process.versions.node.split('.')[0]}`;
  assert.ok(readme.includes(tested), `README.md says it is ${tested}`);
});

test('npm ci of the committed lock prints no EBADENGINE warning on this Node.js', { timeout: 60_000 }, async () => {
  // --dry-run: the whole resolution and engine check, nothing written; --offline: no registry.
  mkdirSync(join(dir, 'packages/client'), { recursive: true });
  for (const file of ['package.json', 'package-lock.json', 'packages/client/package.json']) {
    copyFileSync(join(ROOT, file), join(dir, file));
  }
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  const { stdout, stderr } = await promisify(execFile)(
    'npm',
    ['ci', '--dry-run', '--ignore-scripts', '--offline', '--no-audit', '--no-fund'],
    { cwd: dir, env, timeout: 60_000, maxBuffer: 16 << 20 },
  );
  assert.doesNotMatch(`${stdout}${stderr}`, /EBADENGINE/, stderr);
  assert.match(stdout, /add fastify /);
});

test("the overridden packages give their dependents what they call: light-my-request's cookies, @fastify/static's Content-Disposition", async () => {
  // light-my-request (fastify.inject) writes the request's Cookie header with cookie's stringifySetCookie.
  const app = Fastify();
  app.get('/', async (request) => ({ cookie: request.headers.cookie }));
  const answer = await app.inject({ url: '/', cookies: { session: 'fern 1', other: 'x' } });
  assert.deepEqual(answer.json(), { cookie: 'session=fern%201; other=x' });
  await app.close();

  // @fastify/static (under @fastify/swagger-ui) names downloads with content-disposition's create().
  const fromStatic = createRequire(requireHere.resolve('@fastify/static'));
  const { create } = fromStatic('content-disposition') as { create: (name: string) => string };
  assert.equal(create('plants 2026.ndjson'), 'attachment; filename="plants 2026.ndjson"');
  // The versions the overrides chose: the majors before the ones that need Node.js 22.
  const fromInject = createRequire(requireHere.resolve('light-my-request'));
  assert.equal(majorOf(fromInject.resolve('cookie')), '1');
  assert.equal(majorOf(fromStatic.resolve('content-disposition')), '2');
});
