import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ServerProcess, runCli, startServer } from '../process.js';
import { createListLoad, storedIds } from './create-list-load.js';

// Issue 16, point 2: the repository's own nginx configuration (deploy/nginx.conf) in front of two
// instances on one database; the instances are restarted one by one under create/list load through
// nginx, and no request fails and no acknowledged write is lost. Debian's nginx-light; .ci/run
// installs it when missing. Everything listens on 127.0.0.1.

const NGINX = '/usr/sbin/nginx';
const dir = mkdtempSync(join(tmpdir(), 'plant-store-nginx-'));
after(() => rmSync(dir, { recursive: true, force: true }));

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

async function ready(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.fail(`${url} never became ready`);
}

test('a rolling restart of two instances behind deploy/nginx.conf: 0 failed requests, 0 lost writes', async (t) => {
  try {
    execFileSync(NGINX, ['-v'], { stdio: 'ignore' });
  } catch {
    assert.fail(`this test needs nginx at ${NGINX}: apt-get install nginx-light (.ci/run does)`);
  }
  const [front, portA, portB] = [await freePort(), await freePort(), await freePort()];
  const prefix = join(dir, 'nginx');
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  mkdirSync(join(prefix, 'tmp'), { recursive: true });
  const shipped = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');
  const conf = shipped
    .replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${front};`)
    .replace('server 127.0.0.1:8081 ', `server 127.0.0.1:${portA} `)
    .replace('server 127.0.0.1:8082 ', `server 127.0.0.1:${portB} `);
  for (const port of [front, portA, portB]) assert.ok(conf.includes(`127.0.0.1:${port}`), `port ${port} set`);
  writeFileSync(join(prefix, 'nginx.conf'), conf);
  const nginx: ChildProcess = spawn(NGINX, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'], {
    stdio: 'ignore',
  });
  t.after(async () => {
    if (nginx.exitCode === null) {
      const exited = once(nginx, 'exit');
      nginx.kill('SIGQUIT');
      await exited;
    }
  });

  const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}`, RATE_LIMIT: 'off' };
  const instances: Record<string, ServerProcess> = {};
  const start = async (name: string, port: number): Promise<void> => {
    instances[name] = await startServer({ ...env, PORT: String(port) });
  };
  await start('a', portA);
  await start('b', portB);
  t.after(() => Promise.all(Object.values(instances).map((s) => s.stop())));
  const url = `http://127.0.0.1:${front}`;
  await ready(url);

  const { stdout } = await runCli(
    ['token', 'create', '--subject', 'lb', '--scopes', 'plants:read,plants:write', '--json'],
    { ...process.env, ...env },
  );
  const token = (JSON.parse(stdout) as { token: string }).token;
  const load = createListLoad(url, token, 'lb');

  for (const [name, port] of [
    ['a', portA],
    ['b', portB],
  ] as const) {
    await new Promise((resolve) => setTimeout(resolve, 300)); // let load reach both
    assert.equal(await instances[name]!.stop(), 0, `instance ${name} drained and exited 0`);
    await start(name, port);
    await ready(`http://127.0.0.1:${port}`);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  await load.stop();

  assert.deepEqual(load.failures, [], readFileSync(join(prefix, 'logs', 'error.log'), 'utf8').slice(-1500));
  assert.ok(load.acknowledged.size > 50, `${load.acknowledged.size} creates acknowledged`);
  const stored = await storedIds(url, token, 'lb');
  assert.deepEqual(
    [...load.acknowledged].filter((id) => !stored.has(id)),
    [],
  );
});
