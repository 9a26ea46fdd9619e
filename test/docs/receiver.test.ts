import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type ServerProcess, callServer, runCli, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { type LocalRegistry, startLocalRegistry } from '../support/local-registry.js';
import { freePort } from '../support/postgres.js';
import { markedBlock, userEnv as readUserEnv } from './markdown.js';

// The webhook receiver of docs/events.md ("Verifying a delivery"), run as printed: its install
// block in a fresh folder (`npm install standardwebhooks` from a registry on 127.0.0.1 serving this
// project's copies: no network, whatever the npm cache holds), its file under the name the doc
// gives it, and its run command with a real webhook's secret, against a real delivery from a real
// server (WEBHOOK_ALLOW_PRIVATE=1: the receiver listens on 127.0.0.1). It prints the line the doc
// shows, the id beyond 2^53 exact, on Node.js 20. The changes made to the text: the receiver's
// port (3000 in the doc) and the secret (`whsec_…`).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/events.md'), 'utf8');
const exec = promisify(execFile);

const block = (mark: string): string => markedBlock(DOC, 'receiver', mark);

const fileMark = /<!-- receiver: file (\S+) -->/.exec(DOC);
const runBlock = block('run').split('\n');
const runCommand = runBlock.filter((line) => !line.startsWith('#')).join('\n');
const printed = runBlock.filter((line) => line.startsWith('# → ')).map((line) => line.slice('# → '.length));

const userEnv = readUserEnv();

const dir = mkdtempSync(join(tmpdir(), 'plant-store-receiver-'));
const serverEnv = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: 'off', WEBHOOK_ALLOW_PRIVATE: '1' };
let server: ServerProcess;
let registry: LocalRegistry;
let receiver: ChildProcess | undefined;

before(async () => {
  server = await startServer(serverEnv);
});
after(async () => {
  if (receiver && receiver.exitCode === null && receiver.signalCode === null) {
    const exited = once(receiver, 'exit');
    receiver.kill('SIGTERM');
    await exited;
  }
  await registry?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test(
  'the receiver of docs/events.md, as printed, in a fresh npm init -y folder: a real delivery, the id exact on Node.js 20',
  { timeout: 120_000 },
  async () => {
    assert.ok(fileMark, 'docs/events.md names the receiver file: <!-- receiver: file <name> -->');
    const fileName = fileMark[1]!;
    assert.ok(runCommand.includes(`node ${fileName}`), `the run command starts ${fileName}: ${runCommand}`);
    assert.equal(printed.length, 1, 'the run block prints what the receiver prints for one delivery');

    // The install block, as printed, in a new folder.
    const project = join(dir, 'project');
    mkdirSync(project);
    const scratch = join(dir, 'registry');
    mkdirSync(scratch);
    registry = await startLocalRegistry(
      join(ROOT, 'node_modules'),
      ['standardwebhooks', '@stablelib/base64', 'fast-sha256'],
      scratch,
    );
    const npmEnv = {
      ...userEnv,
      npm_config_registry: registry.url,
      npm_config_cache: join(dir, 'npm-cache'),
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
    };
    const install = block('install');
    assert.match(install, /^npm init -y$/m);
    await exec('bash', ['-c', `set -euo pipefail\n${install}`], { cwd: project, env: npmEnv, timeout: 60_000 });
    const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as Record<string, unknown>;
    // A CommonJS project ("type": "commonjs" with npm 11, none before): the file's name must make it a module.
    assert.notEqual(manifest.type, 'module', 'npm init -y makes a CommonJS project');

    // The file, under the doc's name; the one change: the port.
    const source = block(`file ${fileName}`);
    assert.ok(source.includes('.listen(3000, '), 'the receiver listens on port 3000');
    const port = await freePort();
    writeFileSync(join(project, fileName), `${source.replace('.listen(3000, ', `.listen(${port}, `)}\n`);

    // A webhook to it, and its secret.
    const minted = await runCli(
      ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write,webhooks:read,webhooks:write'],
      serverEnv,
    );
    assert.equal(minted.code, 0, minted.stderr);
    const token = minted.stdout.trim();
    const created = await callServer(
      server,
      token,
      'POST',
      '/webhooks',
      JSON.stringify({ url: `http://127.0.0.1:${port}/` }),
    );
    assert.equal(created.status, 201, created.text);
    const { secret } = JSON.parse(created.text) as { secret: string };

    // The run command, as printed but for the secret.
    assert.ok(runCommand.includes('whsec_…'), 'the run command shows where the secret goes');
    let stdout = '';
    let stderr = '';
    receiver = spawn('bash', ['-c', runCommand.replace('whsec_…', secret)], { cwd: project, env: userEnv });
    receiver.stdout!.on('data', (chunk: Buffer) => void (stdout += chunk.toString()));
    receiver.stderr!.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
    // Listening: an unsigned POST is refused with 400.
    const unsigned = await eventually(
      async () => {
        if (receiver!.exitCode !== null) assert.fail(`the receiver exited ${receiver!.exitCode}: ${stderr}`);
        try {
          const r = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{"id":1}' });
          return r.status;
        } catch {
          return undefined;
        }
      },
      () => `the receiver listens on 127.0.0.1:${port} (stderr: ${stderr})`,
    );
    assert.equal(unsigned, 400);

    // The README's first create, delivered for real.
    const plant = await callServer(
      server,
      token,
      'POST',
      '/plants',
      '{"id": 9007199254740993, "name": "Monstera", "tag": "tropical"}',
    );
    assert.equal(plant.status, 200, plant.text);
    await eventually(
      async () => (stdout.includes('\n') ? true : undefined),
      () => `the receiver printed a delivery (stdout: ${stdout}, stderr: ${stderr})`,
      30_000,
    );
    assert.deepEqual(stdout.trimEnd().split('\n'), printed);
    assert.equal(stderr, '');
    // The server recorded the delivery as delivered (the receiver's 204).
    const hook = (JSON.parse((await callServer(server, token, 'GET', '/webhooks')).text) as Array<{ id: string }>)[0]!;
    await eventually(async () => {
      const deliveries = JSON.parse(
        (await callServer(server, token, 'GET', `/webhooks/${hook.id}/deliveries`)).text,
      ) as Array<{ status: string }>;
      return deliveries[0]?.status === 'delivered' ? true : undefined;
    }, 'the delivery is recorded as delivered');
  },
);

test('what docs/events.md says of Node.js 20: JSON.parse rounds the id, and a reviver gets no source text', () => {
  assert.match(DOC, /On Node\.js\s+21 and later a\s+`JSON.parse` reviver/);
  assert.equal(String((JSON.parse('{"id":9007199254740993}') as { id: number }).id), '9007199254740992');
  if (Number(process.versions.node.split('.')[0]) === 20) {
    let context: unknown = 'unset';
    JSON.parse('{"id":9007199254740993}', function (key, value, ...rest: unknown[]) {
      if (key === 'id') context = rest[0];
      return value as unknown;
    });
    assert.equal(context, undefined);
  }
});
