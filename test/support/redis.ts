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
