import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type ServerProcess, callServer, runCli, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { type LocalRegistry, startLocalRegistry } from '../support/local-registry.js';
import { freePort } from '../support/postgres.js';
import { markedBlock, userEnv as readUserEnv } from './markdown.js';

// docs/events.md, "Following the feed from Node", run as printed: its install block (`npm init -y`,
// `npm install eventsource`) in a fresh folder (from a registry on 127.0.0.1 serving this project's
// copies: no network), the file under the name the doc gives it, its run command with a real token,
// against a real server. The first event it prints is the line the doc shows; then the server is
// stopped and started again on the same port, and the client, by itself, resumes with
// Last-Event-ID: the next event arrives, none twice. The changes made to the text: PLANT_STORE_URL
// (the doc's default is port 8080) and the token.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/events.md'), 'utf8');
const exec = promisify(execFile);

const block = (mark: string): string => markedBlock(DOC, 'feed', mark);

const userEnv = readUserEnv();

const dir = mkdtempSync(join(tmpdir(), 'plant-store-feed-node-'));
let server: ServerProcess | undefined;
let registry: LocalRegistry | undefined;
let client: ChildProcess | undefined;
after(async () => {
  if (client && client.exitCode === null && client.signalCode === null) {
    const exited = once(client, 'exit');
    client.kill('SIGTERM');
    await exited;
  }
  await registry?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test('follow.mjs of docs/events.md, as printed: the event it prints, and the feed resumed by itself after a restart', async () => {
  const fileName = /<!-- feed: file (\S+) -->/.exec(DOC)?.[1];
  assert.ok(fileName, 'docs/events.md names the file: <!-- feed: file <name> -->');
  const run = block('run').split('\n');
  const commands = run.filter((line) => !line.startsWith('#'));
  const printed = run.filter((line) => line.startsWith('# → ')).map((line) => line.slice('# → '.length));
  assert.deepEqual(commands, [`PLANT_STORE_TOKEN=pst_… node ${fileName}`]);
  assert.equal(printed.length, 1);
  // The folder is a project of its own before the install: npm installs into the nearest folder
  // that has a package.json, which need not be the one the reader is in.
  const install = block('install');
  assert.deepEqual(install.split('\n'), ['npm init -y', 'npm install eventsource']);

  const port = await freePort();
  const serverEnv = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: 'off', PORT: String(port) };
  server = await startServer(serverEnv);

  // The install block, as printed, in a new folder inside another project (as a folder made in a
  // checkout would be): the install stays in the new folder, the outer package.json untouched.
  const outer = join(dir, 'outer');
  const outerManifest = '{ "name": "outer", "version": "1.0.0" }\n';
  mkdirSync(outer);
  writeFileSync(join(outer, 'package.json'), outerManifest);
  const project = join(outer, 'project');
  mkdirSync(project);
  const scratch = join(dir, 'registry');
  mkdirSync(scratch);
  registry = await startLocalRegistry(join(ROOT, 'node_modules'), ['eventsource', 'eventsource-parser'], scratch);
  const npmEnv = {
    ...userEnv,
    npm_config_registry: registry.url,
    npm_config_cache: join(dir, 'npm-cache'),
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
  };
  await exec('bash', ['-c', `set -euo pipefail\n${install}`], { cwd: project, env: npmEnv, timeout: 60_000 });
  const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  assert.ok(manifest.dependencies?.eventsource, 'eventsource is a dependency of the new project');
  assert.equal(readFileSync(join(outer, 'package.json'), 'utf8'), outerManifest);
  writeFileSync(join(project, fileName), `${block(`file ${fileName}`)}\n`);

  const minted = await runCli(
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'],
    serverEnv,
  );
  assert.equal(minted.code, 0, minted.stderr);
  const token = minted.stdout.trim();

  let stdout = '';
  let stderr = '';
  client = spawn('bash', ['-c', commands[0]!.replace('pst_…', token)], {
    cwd: project,
    env: { ...userEnv, PLANT_STORE_URL: server.url },
  });
  client.stdout!.on('data', (chunk: Buffer) => void (stdout += chunk.toString()));
  client.stderr!.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  const lines = (): string[] => stdout.split('\n').filter(Boolean);
  // Connected: the server counts one open stream of alice (the feed starts from now).
  await eventually(
    async () => (/plant_store_event_streams(?:\{[^}]*\})? 1\b/.test(await metrics(server!.url)) ? true : undefined),
    () => `follow.mjs opened its stream (stderr: ${stderr})`,
    30_000,
  );

  const create = async (body: string): Promise<void> => {
    const answer = await callServer(server!, token, 'POST', '/plants', body);
    assert.equal(answer.status, 200, answer.text);
  };
  await create('{"id": 1, "name": "Monstera", "tag": "tropical"}');
  await eventually(
    async () => (lines().length >= 1 ? true : undefined),
    () => `the first event (${stderr})`,
    30_000,
  );
  assert.deepEqual(lines(), printed);

  // A restart on the same port: the client reconnects by itself (network errors are retried).
  assert.equal(await server.stop(), 0);
  server = await startServer(serverEnv);
  await create('{"id": 2, "name": "Fern"}');
  await eventually(
    async () => (lines().length >= 2 ? true : undefined),
    () => `the event after the restart (stdout: ${stdout}, stderr: ${stderr})`,
    30_000,
  );
  assert.deepEqual(lines(), [...printed, '2 plant.created {"id":2,"name":"Fern"}']);
  assert.equal(stderr, '');
});

async function metrics(url: string): Promise<string> {
  try {
    return await (await fetch(`${url}/metrics`)).text();
  } catch {
    return '';
  }
}
