import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';
import { type ServerProcess, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/postgres.js';

// The repository's own nginx configuration (deploy/nginx.conf), run by a test in front of two
// instances on 127.0.0.1: Debian's nginx-light (.ci/run installs it when missing). It is started
// and stopped with the commands its header prints (the `#   $ ` lines), run by bash as printed: from
// a checkout (a folder holding deploy/nginx.conf, its ports rewritten), in a folder that does not
// exist yet. The one other change is FRONT's value, the folder, which is the test's own.

const NGINX = '/usr/sbin/nginx';
const SHIPPED = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');
const exec = promisify(execFile);

export interface NginxFront {
  readonly url: string;
  /** The folder nginx runs in (`-p`). */
  readonly folder: string;
  /** nginx's error log so far, for a failure message (its end). */
  errors(): string;
  /** nginx's error log so far, whole. */
  log(): string;
  stop(): Promise<void>;
}

/** The commands the header of deploy/nginx.conf prints (`#   $ …` lines): to start it, and to stop it. */
export function printedCommands(conf: string = SHIPPED): { start: string[]; stop: string[] } {
  const commands = [...conf.matchAll(/^# {3}\$ (.+)$/gm)].map((m) => m[1]!);
  const stopAt = commands.findIndex((c) => / -s \w+$/.test(c));
  assert.ok(stopAt > 0, 'deploy/nginx.conf prints how to start it, then how to stop it');
  return { start: commands.slice(0, stopAt), stop: commands.slice(stopAt) };
}

/** Runs shell lines with bash in `cwd`, failing with what it printed. */
async function bash(lines: string[], cwd: string): Promise<void> {
  try {
    await exec('bash', ['-c', ['set -eu', ...lines].join('\n')], { cwd, timeout: 30_000 });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    assert.fail(`${lines.join('\n')}\nfailed: ${String(error)}\n${stderr ?? ''}${stdout ?? ''}`);
  }
}

/**
 * Starts nginx with deploy/nginx.conf, its ports rewritten (clients on `front`, instances on `a`
 * and `b`), as its header prints, in `dir`/front, a folder that does not exist yet.
 */
export async function startNginx(dir: string, front: number, a: number, b: number): Promise<NginxFront> {
  try {
    execFileSync(NGINX, ['-v'], { stdio: 'ignore' });
  } catch {
    assert.fail(`this test needs nginx at ${NGINX}: apt-get install nginx-light (.ci/run does)`);
  }
  const checkout = join(dir, 'checkout');
  mkdirSync(join(checkout, 'deploy'), { recursive: true });
  const conf = SHIPPED.replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${front};`)
    .replace('server 127.0.0.1:8081 ', `server 127.0.0.1:${a} `)
    .replace('server 127.0.0.1:8082 ', `server 127.0.0.1:${b} `);
  for (const port of [front, a, b]) assert.ok(conf.includes(`127.0.0.1:${port}`), `port ${port} set`);
  writeFileSync(join(checkout, 'deploy', 'nginx.conf'), conf);

  const folder = join(dir, 'front');
  assert.ok(!existsSync(folder));
  const { start, stop } = printedCommands();
  const setFolder = (line: string): string => line.replace(/^FRONT=\S+$/, `FRONT='${folder}'`);
  assert.ok(
    start.some((line) => setFolder(line) !== line),
    'the printed commands name the folder in FRONT=',
  );
  await bash(start.map(setFolder), checkout);
  // The command returns once nginx has gone to the background; it writes its pid file then.
  const pidFile = join(folder, 'nginx.pid');
  await eventually(async () => (existsSync(pidFile) ? true : undefined), `nginx wrote ${pidFile}`, 10_000);
  const errorLog = join(folder, 'error.log');
  return {
    url: `http://127.0.0.1:${front}`,
    folder,
    errors: () => (existsSync(errorLog) ? readFileSync(errorLog, 'utf8').slice(-1500) : '(no error.log)'),
    log: () => (existsSync(errorLog) ? readFileSync(errorLog, 'utf8') : ''),
    stop: async () => {
      if (!existsSync(pidFile)) return;
      // At once: an open stream through it must not hold a test's end.
      const now = stop.find((line) => line.endsWith(' -s stop'));
      assert.ok(now, 'deploy/nginx.conf prints how to stop it at once (-s stop)');
      await bash([...start.map(setFolder).filter((line) => line.startsWith('FRONT=')), now], checkout);
      // nginx removes its pid file as its master process exits.
      await eventually(async () => (existsSync(pidFile) ? undefined : true), 'nginx stopped', 15_000);
    },
  };
}

/** What nginx made in its folder: the names, sorted. */
export const folderContents = (front: NginxFront): string[] => readdirSync(front.folder).sort();

/** Until `url`/readyz answers 200 (through nginx: until an instance behind it is ready), up to 30 s. */
export async function ready(url: string): Promise<void> {
  await eventually(
    async () => {
      try {
        const response = await fetch(`${url}/readyz`);
        await response.arrayBuffer();
        return response.status === 200 ? true : undefined;
      } catch {
        return undefined; // not listening yet
      }
    },
    `${url} ready`,
    30_000,
  );
}

/** The instances behind deploy/nginx.conf: a on its upstream's first server line, b on its second. */
export type InstanceName = 'a' | 'b';

export interface TwoBehindNginx {
  readonly nginx: NginxFront;
  /** nginx's address: where clients go. */
  readonly url: string;
  readonly ports: { readonly front: number } & Readonly<Record<InstanceName, number>>;
  /** Each instance as it runs now (a start replaces its entry); the test's end stops them all. */
  readonly instances: Record<string, ServerProcess>;
  /**
   * Starts `name` again on its own port and waits for its own /readyz 200: the restart step
   * deploy/nginx.conf's header prints (never a wait through nginx, which another instance answers).
   */
  readonly start: (name: InstanceName) => Promise<void>;
}

/**
 * deploy/nginx.conf (startNginx, in a new folder in `dir`) in front of instances a and b of
 * `plant-store serve` on free ports, with `env` (the test's store) over this fixture's settings.
 * `start` names the instances running on return (both by default). With both, nginx has answered
 * /readyz 200 on return; with one left out, nginx has not been asked: a test that leaves one out
 * is about what nginx answers then. The test's end stops nginx, then the instances.
 */
export async function twoBehindNginx(
  t: TestContext,
  dir: string,
  env: NodeJS.ProcessEnv,
  { start = ['a', 'b'] }: { start?: InstanceName[] } = {},
): Promise<TwoBehindNginx> {
  const ports = { front: await freePort(), a: await freePort(), b: await freePort() };
  const nginx = await startNginx(mkdtempSync(join(dir, 'nginx-')), ports.front, ports.a, ports.b);
  t.after(() => nginx.stop());
  const settings: NodeJS.ProcessEnv = {
    // A test's load runs on one token, past the requests a token may make by default (600 a
    // minute, docs/api.md), and these tests count every answer but a 200 as a failure.
    RATE_LIMIT: 'off',
    // The shipped SHUTDOWN_GRACE, not startServer's 4 s: the instances' Keep-Alive timeout is half
    // of it (5 s), and nginx's upstream keepalive_timeout (2 s) must stay below it, or nginx may
    // reuse a connection an instance is closing.
    SHUTDOWN_GRACE: '10s',
    ...env,
  };
  const instances: Record<string, ServerProcess> = {};
  const launch = async (name: InstanceName): Promise<void> => {
    instances[name] = await startServer({ ...settings, PORT: String(ports[name]) });
  };
  t.after(() => Promise.all(Object.values(instances).map((s) => s.stop())));
  for (const name of start) await launch(name);
  if (start.includes('a') && start.includes('b')) await ready(nginx.url);
  return {
    nginx,
    url: nginx.url,
    ports,
    instances,
    start: async (name) => {
      await launch(name);
      await ready(`http://127.0.0.1:${ports[name]}`);
    },
  };
}
