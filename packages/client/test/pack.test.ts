import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, lstatSync, readFileSync, readdirSync, realpathSync } from 'node:fs';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type ServerProcess, runCli, startServer } from '../../../test/process.js';

/**
 * The client as another project gets it (issue 17): `npm pack` of this package, installed into a
 * fresh project, and the two examples of packages/client/README.md (taken from the README itself,
 * by the `<!-- file: … -->` and `<!-- output -->` marks before their code blocks) run against a
 * real server, printing exactly the lines the README shows.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLIENT = join(ROOT, 'packages/client');
const README = readFileSync(join(CLIENT, 'README.md'), 'utf8');
const TOKEN_ARGS = ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'];
const WEBHOOK_TOKEN_ARGS = [
  'token',
  'create',
  '--subject',
  'alice',
  '--scopes',
  'plants:read,plants:write,webhooks:read,webhooks:write',
];
// Bounds every child process: npm pack and an offline install take about a second each, tsc a few.
const TIMEOUT_MS = 120_000;

/**
 * The marked code blocks of the README: the files to write (by name), the output the plant
 * examples print (`<!-- output -->`), and the outputs of other examples (`<!-- output: name -->`).
 */
function readmeBlocks(): { files: Map<string, string>; output: string; outputs: Map<string, string> } {
  const files = new Map<string, string>();
  const outputs = new Map<string, string>();
  let output: string | undefined;
  for (const m of README.matchAll(/<!-- (?:file: (\S+)|output(?:: (\S+))?) -->\n+```[a-z]*\n([\s\S]*?)\n```/g)) {
    if (m[1] !== undefined) files.set(m[1], `${m[3]!}\n`);
    else if (m[2] !== undefined) outputs.set(m[2], `${m[3]!}\n`);
    else output = `${m[3]!}\n`;
  }
  assert.ok(output !== undefined, 'the README marks its printed output with <!-- output -->');
  return { files, output, outputs };
}
const { files: EXAMPLES, output: PRINTED, outputs: OUTPUTS } = readmeBlocks();

// `npm test` runs this file under npm: its npm_* variables (npm_config_*, npm_package_*) must not
// steer the npm run here in another project, nor NODE_OPTIONS (tsx) the examples.
const childEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'),
);
const exec = promisify(execFile);
const run = (file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) =>
  exec(file, args, { cwd, env: { ...childEnv, ...env }, timeout: TIMEOUT_MS, maxBuffer: 16 << 20 });
const npm = (args: string[], cwd: string) => run('npm', args, cwd);
const node = (args: string[], cwd: string, env: NodeJS.ProcessEnv = {}) => run(process.execPath, args, cwd, env);

/** A new project, as `npm init -y` makes it, holding the client installed the README's way. */
async function newProject(dir: string, install: string): Promise<void> {
  await mkdir(dir);
  await npm(['init', '-y'], dir);
  // --offline: the client has no dependencies, so nothing may need the registry.
  await npm(['install', '--offline', '--no-audit', '--no-fund', install], dir);
  await npm(['pkg', 'set', 'type=module'], dir);
}

async function writeExamples(dir: string): Promise<void> {
  for (const [name, text] of EXAMPLES) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
}

let work: string;
let server: ServerProcess;
let serverEnv: NodeJS.ProcessEnv;
let exampleEnv: NodeJS.ProcessEnv;
let webhookEnv: NodeJS.ProcessEnv;
let packed: { filename: string; files: Array<{ path: string }> };
let project: string;

before(async () => {
  // `npm test` builds dist/ first; run alone, this file needs `npm run build` before it.
  assert.ok(existsSync(join(CLIENT, 'dist/index.js')), 'packages/client/dist is missing: run `npm run build` first');
  work = await mkdtemp(join(tmpdir(), 'plant-store-pack-'));
  // WEBHOOK_ALLOW_PRIVATE: the webhooks example runs its receiver on 127.0.0.1, as the README says.
  serverEnv = { DATABASE_URL: `sqlite:${join(work, 'plants.db')}`, RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1' };
  server = await startServer(serverEnv);
  const minted = await runCli(TOKEN_ARGS, serverEnv, ROOT);
  assert.equal(minted.code, 0, minted.stderr);
  exampleEnv = { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: minted.stdout.trim() };
  const mintedForWebhooks = await runCli(WEBHOOK_TOKEN_ARGS, serverEnv, ROOT);
  assert.equal(mintedForWebhooks.code, 0, mintedForWebhooks.stderr);
  webhookEnv = { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: mintedForWebhooks.stdout.trim() };

  // --ignore-scripts: the prepack script would compile dist/ again, rewriting files that tests
  // running beside this one load; `npm test` has just built it from the same sources.
  const pack = ['pack', '--workspace', 'packages/client', '--pack-destination', work, '--ignore-scripts', '--json'];
  const { stdout } = await npm(pack, ROOT);
  [packed] = JSON.parse(stdout) as [typeof packed];
  project = join(work, 'project');
  await newProject(project, join(work, packed.filename));
});

after(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

test('the README prints the commands this test runs, and the name npm pack gives the tarball', () => {
  const version = (JSON.parse(readFileSync(join(CLIENT, 'package.json'), 'utf8')) as { version: string }).version;
  assert.equal(packed.filename, `plant-store-client-${version}.tgz`);
  for (const command of [
    'npm pack --workspace packages/client --pack-destination /tmp',
    `npm install /tmp/${packed.filename}`,
    'npm install /path/to/plant-store/packages/client',
    `node bin/plant-store.js ${TOKEN_ARGS.join(' ')}`,
    `node bin/plant-store.js ${WEBHOOK_TOKEN_ARGS.join(' ')}`,
    'WEBHOOK_ALLOW_PRIVATE=1 npm start',
    'node example.mjs',
    'node webhooks.mjs',
    'npm pkg set type=module',
    'npx tsc',
    'node dist/example.js',
  ]) {
    assert.ok(README.includes(command), `README.md shows \`${command}\``);
  }
  assert.deepEqual([...EXAMPLES.keys()], ['example.mjs', 'tsconfig.json', 'src/example.ts', 'webhooks.mjs']);
  assert.deepEqual([...OUTPUTS.keys()], ['webhooks.mjs']);
});

test('the tarball holds dist/ (JavaScript and .d.ts for every module), src/, LICENSE, README.md and package.json, and no tests', () => {
  const paths = packed.files.map((file) => file.path).sort();
  const modules = readdirSync(join(CLIENT, 'src')).map((name) => name.replace(/\.ts$/, ''));
  assert.ok(modules.includes('index'));
  for (const module of modules) {
    for (const path of [`dist/${module}.js`, `dist/${module}.d.ts`, `src/${module}.ts`]) {
      assert.ok(paths.includes(path), `${path} is packed`);
    }
  }
  assert.ok(paths.includes('README.md') && paths.includes('package.json'));
  assert.deepEqual(
    paths.filter((path) => !/^(dist|src)\//.test(path)),
    ['LICENSE', 'README.md', 'package.json'],
  );
});

test('npm install of the tarball copies the client into a fresh project offline, with no dependency of its own', () => {
  const installed = join(project, 'node_modules/@plant-store/client');
  assert.ok(!lstatSync(installed).isSymbolicLink(), 'a copy, not a link to the repository');
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as Record<string, unknown>;
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
    assert.equal(manifest[field], undefined, `the client declares no ${field}`);
  }
  assert.equal(manifest.type, 'module');
  assert.deepEqual(manifest.exports, {
    '.': { types: './dist/index.d.ts', default: './dist/index.js' },
    './package.json': './package.json',
  });
  assert.ok(existsSync(join(installed, 'README.md')));
  assert.deepEqual(readdirSync(join(project, 'node_modules')).sort(), ['.package-lock.json', '@plant-store']);
  const app = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as Record<string, unknown>;
  assert.deepEqual(app.dependencies, { '@plant-store/client': `file:../${packed.filename}` });
});

test('the JavaScript example of the README runs as printed: ids beyond 2^53 exact, every page, a typed 409', async () => {
  await writeExamples(project);
  const { stdout, stderr } = await node(['example.mjs'], project, exampleEnv);
  assert.equal(stdout, PRINTED);
  assert.equal(stderr, '');
  // It deleted what it created: the store is empty again.
  const exported = await runCli(['export'], serverEnv, ROOT);
  assert.equal(exported.code, 0, exported.stderr);
  assert.equal(exported.stdout, '');
});

test('the TypeScript example compiles with tsc against the packed .d.ts and runs as printed', async () => {
  await writeExamples(project);
  // The README's `npm install --save-dev typescript @types/node`, offline: the repository's copies.
  await mkdir(join(project, 'node_modules/@types'));
  await symlink(join(ROOT, 'node_modules/@types/node'), join(project, 'node_modules/@types/node'), 'dir');
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  const compiled = await node([tsc, '-p', '.'], project);
  assert.equal(compiled.stdout, '');
  const { stdout, stderr } = await node(['dist/example.js'], project, exampleEnv);
  assert.equal(stdout, PRINTED);
  assert.equal(stderr, '');

  // The types hold: an id given as a number does not compile. Checked with skipLibCheck off, this
  // is also the only error: the packed .d.ts are sound for a project that checks libraries too.
  await writeFile(join(project, 'src/number-id.ts'), `${EXAMPLES.get('src/example.ts')!}await client.delete(5);\n`);
  const refused = await node([tsc, '-p', '.', '--noEmit', '--skipLibCheck', 'false'], project).then(
    () => assert.fail('tsc compiled client.delete(5)'),
    (error: { code: number; stdout: string }) => error,
  );
  assert.equal(refused.code, 2);
  const errors = refused.stdout.split('\n').filter((line) => /error TS\d+/.test(line));
  assert.equal(errors.length, 1, refused.stdout);
  assert.match(errors[0]!, /^src\/number-id\.ts\(\d+,\d+\): error TS2345: Argument of type 'number'/);
});

test('npm install of the path links the built package of the clone, and the JavaScript example runs as printed', async () => {
  const linked = join(work, 'linked');
  await newProject(linked, CLIENT);
  const installed = join(linked, 'node_modules/@plant-store/client');
  assert.ok(lstatSync(installed).isSymbolicLink());
  assert.equal(realpathSync(installed), realpathSync(CLIENT));
  await writeExamples(linked);
  const { stdout, stderr } = await node(['example.mjs'], linked, exampleEnv);
  assert.equal(stdout, PRINTED);
  assert.equal(stderr, '');
});

test('the webhooks example of the README runs as printed: a ping and a plant event signed, a rotation, exact ids', async () => {
  await writeExamples(project);
  const { stdout, stderr } = await node(['webhooks.mjs'], project, webhookEnv);
  assert.equal(stdout, OUTPUTS.get('webhooks.mjs'));
  assert.equal(stderr, '');
  // It deleted what it created: no plant, no webhook.
  const plants = await runCli(['export'], serverEnv, ROOT);
  assert.equal(plants.stdout, '');
  const webhooks = await runCli(['webhooks', 'list', '--json'], serverEnv, ROOT);
  assert.equal(webhooks.code, 0, webhooks.stderr);
  assert.deepEqual(JSON.parse(webhooks.stdout), []);
});
