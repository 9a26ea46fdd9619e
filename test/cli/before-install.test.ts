import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type CliResult } from '../process.js';

// `npm start` or `npx plant-store` before `npm ci` (no node_modules), or after dist/ was removed,
// says in one line what to run and exits 1, instead of node's ERR_MODULE_NOT_FOUND stack. Each
// case is a copy of the command (bin/, scripts/, package.json) in a folder of its own: the
// checkout's own node_modules and dist/ are never touched, since other tests run from them.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const temp = mkdtempSync(join(tmpdir(), 'plant-store-before-install-'));
after(() => rmSync(temp, { recursive: true, force: true }));

// npm_* variables of an enclosing `npm test` must not steer npm here, nor NODE_OPTIONS (tsx) the command.
const childEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'),
);

let n = 0;
/** A copy of the checkout without node_modules and dist/; `packages` are stand-ins in its node_modules. */
function checkout({ packages = [] as string[], dist = false } = {}): string {
  const dir = join(temp, `checkout-${n++}`);
  for (const part of ['bin', 'scripts', 'package.json']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  for (const name of packages) {
    mkdirSync(join(dir, 'node_modules', name), { recursive: true });
    writeFileSync(join(dir, 'node_modules', name, 'package.json'), JSON.stringify({ name, version: '0.0.0' }));
  }
  // The built dist/, read only: the check must not care whether it would load.
  if (dist) symlinkSync(join(ROOT, 'dist'), join(dir, 'dist'), 'dir');
  return dir;
}

function run(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd, env: { ...childEnv, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

/** stderr without npm's own warnings about this machine's npm configuration. */
const said = (r: CliResult): string =>
  r.stderr
    .split('\n')
    .filter((line) => !line.startsWith('npm warn'))
    .join('\n');

const NPM_CI = (dir: string): string =>
  `plant-store: the dependencies are not installed: run \`npm ci\` in ${dir} first (it also builds dist/)\n`;

test('before npm ci: the command, npm start and npx plant-store say to run npm ci, in one line, exit 1', async () => {
  const dir = checkout();
  const direct = await run(process.execPath, ['bin/plant-store.js', 'serve'], dir);
  assert.deepEqual(direct, { code: 1, stdout: '', stderr: NPM_CI(dir) });

  const start = await run('npm', ['start', '--silent'], dir);
  assert.equal(start.code, 1);
  assert.equal(said(start), NPM_CI(dir));

  // npx links the checkout into its cache and runs its prepare script, whose output npm hides:
  // without TypeScript it must let the command speak rather than fail in silence.
  const cache = join(temp, 'npx-cache');
  const npx = await run('npx', ['plant-store', 'serve'], dir, {
    npm_config_cache: cache,
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false',
  });
  assert.equal(npx.code, 1);
  assert.equal(said(npx), NPM_CI(dir));
});

test('a built dist/ without node_modules still says to run npm ci', async () => {
  const dir = checkout({ dist: true });
  const r = await run(process.execPath, ['bin/plant-store.js', '--help'], dir);
  assert.deepEqual(r, { code: 1, stdout: '', stderr: NPM_CI(dir) });
});

test('node_modules without dist/ says to run npm run build; without TypeScript too, npm ci', async () => {
  const dev = checkout({ packages: ['fastify', 'typescript'] });
  assert.deepEqual(await run(process.execPath, ['bin/plant-store.js', 'serve'], dev), {
    code: 1,
    stdout: '',
    stderr: `plant-store: dist/ (the compiled TypeScript) is missing: run \`npm run build\` in ${dev} first\n`,
  });
  const production = checkout({ packages: ['fastify'] });
  const r = await run(process.execPath, ['bin/plant-store.js', 'serve'], production);
  assert.equal(r.code, 1);
  assert.match(
    r.stderr,
    /^plant-store: dist\/ \(the compiled TypeScript\) is missing and TypeScript is not installed: run `npm ci` in .* first \(docs\/operations\.md: a production install\)\n$/,
  );
});

test('an install without the optional OpenTelemetry packages: serve with tracing on says so in one line, exit 1', async () => {
  // --omit=optional leaves out package.json's optionalDependencies, the tracing packages alone.
  const dir = checkout({ packages: ['fastify'], dist: true });
  const r = await run(process.execPath, ['bin/plant-store.js', 'serve'], dir, {
    OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
  });
  assert.deepEqual(r, {
    code: 1,
    stdout: '',
    stderr:
      'plant-store: tracing is on (an OTLP endpoint is set: docs/tracing.md) but OpenTelemetry is not installed ' +
      '(@opentelemetry/exporter-trace-otlp-grpc and 6 more: an install made with --omit=optional): ' +
      `run \`npm ci\`, then \`npm prune --omit=dev\`, in ${dir}, or unset the endpoint\n`,
  });
});
