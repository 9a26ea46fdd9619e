import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { createListLoad, storedIds } from './create-list-load.js';

// The documented launch commands pass SIGTERM to the server, and SIGHUP
// under `serve --workers N` replaces the workers one at a time with no failed request and no lost
// write. Every process here is started by the test and listens on 127.0.0.1 only.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'plant-store-launch-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let dbs = 0;
const sqliteUrl = (): string => `sqlite:${join(dir, `store-${++dbs}.db`)}`;

/** Whether a process of this pid still exists. */
const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The pids of every process below `pid` (from ps). */
function descendants(pid: number): number[] {
  const out = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' });
  const children = new Map<number, number[]>();
  for (const line of out.trim().split('\n')) {
    const [p, pp] = line.trim().split(/\s+/).map(Number) as [number, number];
    children.set(pp, [...(children.get(pp) ?? []), p]);
  }
  const found: number[] = [];
  const walk = (p: number): void => {
    for (const c of children.get(p) ?? []) {
      found.push(c);
      walk(c);
    }
  };
  walk(pid);
  return found;
}

/** Waits until `log()` matches `pattern` `count` times, or fails after `ms`. */
async function waitFor(log: () => string, pattern: RegExp, count = 1, ms = 30_000): Promise<void> {
  const global = new RegExp(pattern.source, 'g');
  await eventually(
    async () => ((log().match(global)?.length ?? 0) >= count ? true : undefined),
    () => `${count} × ${pattern} in:\n${log()}`,
    ms,
  );
}

/** A launch command in its own process, its output collected. */
function launch(command: string, args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; log: () => string } {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => void (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (out += chunk.toString()));
  return { child, log: () => out };
}

describe('SIGTERM to the documented launch commands reaches the server', () => {
  for (const [name, command, args, listeners] of [
    ['npm start', 'npm', ['start'], 1],
    ['npx plant-store serve --workers 2', 'npx', ['--yes', 'plant-store', 'serve', '--workers', '2'], 2],
  ] as const) {
    test(`${name}: every process exits after draining`, { timeout: 180_000 }, async (t) => {
      const { child, log } = launch(command, [...args], { DATABASE_URL: sqliteUrl() });
      let tree: number[] = [];
      // A failure must not leave the tree running: it would keep this test file alive for ever.
      t.after(() => {
        for (const pid of new Set([child.pid!, ...tree, ...descendants(child.pid!)])) {
          if (alive(pid)) process.kill(pid, 'SIGKILL');
        }
      });
      // npx links the package into its cache first: on a loaded machine that alone can take a while.
      await waitFor(log, /Server listening at http:\/\/127\.0\.0\.1:\d+/, listeners, 90_000);
      const url = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(log())![1]!;
      assert.equal((await fetch(`${url}/healthz`)).status, 200);
      tree = descendants(child.pid!);
      assert.ok(tree.length >= listeners, `processes under ${name}: ${tree.join(', ')}`);

      child.kill('SIGTERM'); // the launcher's own pid, as a supervisor or `docker stop` does
      await eventually(
        async () => (child.exitCode !== null || child.signalCode !== null ? true : undefined),
        () => `${name} exited after SIGTERM; its output:\n${log()}`,
        30_000,
      );
      await waitFor(log, /"msg":"stopped cleanly"/, listeners);
      await eventually(
        async () => (tree.some(alive) ? undefined : true),
        () => `no process of the tree left: ${tree.filter(alive).join(', ')} still run`,
      );
      assert.match(log(), /shutting down: finishing in-flight requests/);
      await assert.rejects(fetch(`${url}/healthz`), 'the port no longer answers');
    });
  }
});

describe('SIGHUP', () => {
  test('without --workers: logged, and the server keeps serving (its start-up line says the port PORT=0 bound)', async () => {
    const server = await startServer({ DATABASE_URL: sqliteUrl(), PORT: '0' });
    try {
      await waitFor(() => server.logs(), /"msg":"plant-store serving"/);
      const serving = server
        .logs()
        .split('\n')
        .filter((line) => line.includes('"msg":"plant-store serving"'))
        .map((line) => JSON.parse(line) as { port: number });
      assert.deepEqual(
        serving.map((line) => line.port),
        [Number(new URL(server.url).port)],
      );
      server.child.kill('SIGHUP');
      await waitFor(() => server.logs(), /SIGHUP: a single process does not reload/);
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    } finally {
      await server.stop();
    }
  });

  test('with --workers 1: a reload replaces the one worker and puts a changed setting live (CORS_ORIGINS)', async () => {
    const settings = join(dir, 'settings-one.env');
    writeFileSync(settings, 'LOG_LEVEL=info\n');
    const server = await startServer({ DATABASE_URL: sqliteUrl(), RATE_LIMIT: 'off' }, undefined, [
      '--workers',
      '1',
      '--settings-file',
      settings,
    ]);
    const preflight = () =>
      fetch(`${server.url}/plants`, {
        method: 'OPTIONS',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
      });
    try {
      const before = await preflight();
      assert.equal(before.status, 405); // CORS is off: OPTIONS is a method /plants does not have
      assert.equal(before.headers.get('access-control-allow-origin'), null);

      writeFileSync(settings, 'LOG_LEVEL=info\nCORS_ORIGINS=https://app.example\n');
      server.child.kill('SIGHUP');
      await waitFor(() => server.logs(), /"msg":"reload done"/);
      assert.equal((server.logs().match(/reload: the old worker stopped/g) ?? []).length, 1);

      const after = await preflight();
      assert.equal(after.status, 204);
      assert.equal(after.headers.get('access-control-allow-origin'), 'https://app.example');
    } finally {
      await server.stop();
    }
  });

  test('with --workers 2 under create/list load: three reloads, 0 failed requests, 0 lost writes; bad settings keep the workers', async () => {
    const settings = join(dir, 'settings.env');
    writeFileSync(settings, 'LOG_LEVEL=info\n');
    const env = { DATABASE_URL: sqliteUrl(), RATE_LIMIT: 'off' };
    const server = await startServer(env, undefined, ['--workers', '2', '--settings-file', settings]);
    try {
      const token = await mintCliToken(env, 'reload');
      const load = createListLoad(server.url, token, 'reload');

      writeFileSync(settings, 'LOG_LEVEL=loud\n'); // does not parse: refused, the workers stay
      server.child.kill('SIGHUP');
      await waitFor(() => server.logs(), /reload refused: the settings do not parse/);
      writeFileSync(settings, 'LOG_LEVEL=info\n');
      for (let reload = 1; reload <= 3; reload++) {
        server.child.kill('SIGHUP');
        await waitFor(() => server.logs(), /"msg":"reload done"/, reload);
      }
      await load.stop();

      assert.deepEqual(load.failures, []);
      assert.ok(load.acknowledged.size > 0);
      assert.equal((server.logs().match(/reload: the old worker stopped/g) ?? []).length, 6);
      // Every acknowledged create is stored: read every page back.
      const stored = await storedIds(server.url, token, 'reload');
      assert.deepEqual(
        [...load.acknowledged].filter((id) => !stored.has(id)),
        [],
        `no acknowledged create is missing (${stored.size} stored, ${load.acknowledged.size} acknowledged)`,
      );
    } finally {
      await server.stop();
    }
  });
});
