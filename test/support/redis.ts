import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { freePort } from './postgres.js';

/**
 * Redis for the tests: TEST_REDIS_URL when set (CI uses this machine's server), else one on
 * 127.0.0.1:6379 if it answers, else a throwaway `redis-server` when the binary is installed.
 * When none can be had the tests that need it fail and say so: no silent skip.
 */

async function answers(url: string): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

let throwaway: { url: string; stop: () => void } | undefined;

export async function redisUrl(): Promise<string> {
  if (process.env.TEST_REDIS_URL) return process.env.TEST_REDIS_URL;
  if (await answers('redis://127.0.0.1:6379')) return 'redis://127.0.0.1:6379';
  if (throwaway) return throwaway.url;
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const failed = once(child, 'error').then(([error]) => {
    throw new Error(
      `no Redis for the tests: TEST_REDIS_URL is not set, none answers on 127.0.0.1:6379, and redis-server could not start (${String(error)})`,
    );
  });
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + 5000;
  while (!(await Promise.race([answers(url), failed]))) {
    if (Date.now() > deadline) {
      child.kill();
      throw new Error('no Redis for the tests: redis-server did not answer within 5 s');
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.unref(); // stopped on exit below; it must not keep the test process alive
  throwaway = { url, stop: () => void child.kill() };
  process.once('exit', () => throwaway?.stop());
  return url;
}

/** A `redis-server` of a test's own, on a free 127.0.0.1 port, that it stops and starts again (an outage). */
export interface StoppableRedis {
  readonly url: string;
  /** Stops it by its pid and waits for it to exit. */
  stop(): Promise<void>;
  /** Starts it again on the same port and waits until it answers. */
  start(): Promise<void>;
}

export async function stoppableRedis(): Promise<StoppableRedis> {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ReturnType<typeof spawn> | undefined;
  const start = async (): Promise<void> => {
    const started = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    child = started;
    let exited: string | undefined;
    started.once('error', (error) => void (exited = `redis-server could not start (${String(error)})`));
    started.once('exit', (code) => void (exited ??= `redis-server exited with ${code}`));
    const deadline = Date.now() + 10_000;
    while (!(await answers(url))) {
      if (exited !== undefined) throw new Error(`no Redis for this test: ${exited}`);
      if (Date.now() > deadline) throw new Error(`redis-server on port ${port} did not answer within 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const stop = async (): Promise<void> => {
    const running = child;
    child = undefined;
    if (running === undefined || running.exitCode !== null || running.signalCode !== null) return;
    const exited = once(running, 'exit');
    running.kill('SIGTERM');
    await exited;
  };
  await start();
  return { url, stop, start };
}
