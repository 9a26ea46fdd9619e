import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type ServerProcess, callServer, runCli, startServer } from '../process.js';
import { type LocalRegistry, dependencyFolders, startLocalRegistry } from '../support/local-registry.js';
import { markedBlock, userEnv } from './markdown.js';

// docs/clients.md, "A TypeScript client generated with openapi-typescript", run as printed: its
// install block in a fresh folder (from a registry on 127.0.0.1 serving this project's copies of
// the packages and of everything they depend on: no network), generate.ts against a real server,
// then client.ts with a real token. The doc once said only "run `npx tsx
// generate.ts` while a server runs", which in a fresh folder failed: nothing installed, and
// top-level await in a CommonJS project. The changes made to the text: the server's port (8080 in
// the doc) and the token.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/clients.md'), 'utf8');
const exec = promisify(execFile);
const BIG = '9007199254740993';

const block = (mark: string): string => markedBlock(DOC, 'generated', mark);

const dir = mkdtempSync(join(tmpdir(), 'plant-store-generated-client-'));
let server: ServerProcess | undefined;
let registry: LocalRegistry | undefined;
after(async () => {
  await registry?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test(
  'the generated client of docs/clients.md, as printed, in a fresh folder: types from a real server, a plant created and deleted, its id exact',
  { timeout: 240_000 },
  async () => {
    const install = block('install');
    const commands = install.split('\n').filter((line) => !line.startsWith('#'));
    assert.equal(commands[0], 'npm init -y');
    const packages = commands
      .filter((line) => line.startsWith('npm install'))
      .flatMap((line) => line.split(/\s+/).slice(2))
      .filter((word) => !word.startsWith('-'));
    assert.deepEqual(packages.sort(), ['openapi-fetch', 'openapi-typescript', 'tsx', 'typescript']);

    const project = join(dir, 'project');
    mkdirSync(project);
    mkdirSync(join(dir, 'registry'));
    const nodeModules = join(ROOT, 'node_modules');
    registry = await startLocalRegistry(nodeModules, dependencyFolders(nodeModules, packages), join(dir, 'registry'));
    const env = {
      ...userEnv(),
      npm_config_registry: registry.url,
      npm_config_cache: join(dir, 'npm-cache'),
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
    };
    const sh = (script: string, extra: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> =>
      exec('bash', ['-c', `set -euo pipefail\n${script}`], {
        cwd: project,
        env: { ...env, ...extra },
        timeout: 180_000,
      });
    const installed = await sh(install);
    // npm 11's one warning, which the doc explains: esbuild's install script, skipped.
    const skipped = [...installed.stderr.matchAll(/^npm warn install-scripts +(\S+)@\S+ \(/gm)].map((m) => m[1]);
    assert.ok(
      skipped.every((name) => name === 'esbuild'),
      installed.stderr,
    );
    if (skipped.length > 0) assert.match(DOC, /esbuild \(tsx's compiler\) has an install script/);

    const serverEnv = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: 'off' };
    server = await startServer(serverEnv);
    const port = new URL(server.url).port;
    for (const name of ['generate.ts', 'client.ts']) {
      const source = block(`file ${name}`);
      assert.ok(source.includes('http://127.0.0.1:8080'), `${name} calls 127.0.0.1:8080`);
      writeFileSync(join(project, name), `${source.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`)}\n`);
    }

    assert.equal(block('run generate'), 'npx tsx generate.ts');
    await sh(block('run generate'));
    const types = readFileSync(join(project, 'plant-store.ts'), 'utf8');
    assert.match(types, /id: bigint;/, 'int64 ids are typed bigint');

    const minted = await runCli(
      ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'],
      serverEnv,
    );
    assert.equal(minted.code, 0, minted.stderr);
    const token = minted.stdout.trim();
    const run = block('run client');
    assert.ok(run.includes('pst_…'), 'the run line shows where the token goes');
    const ran = await sh(run.replace('pst_…', token));
    assert.equal(ran.stdout, '');

    // The feed saw the plant created and deleted, under its exact id.
    const feed = await callServer(server, token, 'GET', '/events', undefined, { accept: 'application/json' });
    assert.equal(feed.status, 200, feed.text);
    assert.match(
      feed.text,
      new RegExp(`"type":"plant.created","data":\\{"id":${BIG},"name":"Monstera","tag":"tropical"\\}`),
    );
    assert.match(feed.text, new RegExp(`"type":"plant.deleted","data":\\{"id":${BIG}\\}`));
  },
);
