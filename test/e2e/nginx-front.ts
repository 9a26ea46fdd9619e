import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// The repository's own nginx configuration (deploy/nginx.conf), run by a test in front of two
// instances on 127.0.0.1: Debian's nginx-light (.ci/run installs it when missing).

const NGINX = '/usr/sbin/nginx';

export interface NginxFront {
  readonly url: string;
  /** nginx's error log so far, for a failure message. */
  errors(): string;
  stop(): Promise<void>;
}

/** Starts nginx with deploy/nginx.conf, its ports rewritten: clients on `front`, instances on `a` and `b`. */
export function startNginx(dir: string, front: number, a: number, b: number): NginxFront {
  try {
    execFileSync(NGINX, ['-v'], { stdio: 'ignore' });
  } catch {
    assert.fail(`this test needs nginx at ${NGINX}: apt-get install nginx-light (.ci/run does)`);
  }
  const prefix = join(dir, 'nginx');
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  mkdirSync(join(prefix, 'tmp'), { recursive: true });
  const shipped = readFileSync(new URL('../../deploy/nginx.conf', import.meta.url), 'utf8');
  const conf = shipped
    .replace('listen 127.0.0.1:8080;', `listen 127.0.0.1:${front};`)
    .replace('server 127.0.0.1:8081 ', `server 127.0.0.1:${a} `)
    .replace('server 127.0.0.1:8082 ', `server 127.0.0.1:${b} `);
  for (const port of [front, a, b]) assert.ok(conf.includes(`127.0.0.1:${port}`), `port ${port} set`);
  writeFileSync(join(prefix, 'nginx.conf'), conf);
  const nginx: ChildProcess = spawn(NGINX, ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-g', 'daemon off;'], {
    stdio: 'ignore',
  });
  return {
    url: `http://127.0.0.1:${front}`,
    errors: () => readFileSync(join(prefix, 'logs', 'error.log'), 'utf8').slice(-1500),
    stop: async () => {
      if (nginx.exitCode !== null || nginx.signalCode !== null) return;
      const exited = once(nginx, 'exit');
      nginx.kill('SIGTERM'); // fast: an open stream through it must not hold a test's end
      await exited;
    },
  };
}

/** Until `url`/readyz answers 200 (through nginx: until an instance behind it is ready). */
export async function ready(url: string): Promise<void> {
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
