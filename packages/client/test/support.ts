import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli, startServer } from '../../../test/process.js';

export interface TestServer {
  readonly url: string;
  /** The server's settings: the same DATABASE_URL lets the CLI mint tokens for it. */
  readonly env: NodeJS.ProcessEnv;
  /** A fresh token from `plant-store token create --json`. */
  token(scopes?: string[], subject?: string): Promise<string>;
  stop(): Promise<void>;
}

export interface TestServerOptions {
  /** More settings, e.g. WEBHOOK_ALLOW_PRIVATE=1 for a receiver on 127.0.0.1. */
  env?: NodeJS.ProcessEnv;
  /** Runs before the server starts, with its settings and its database file. */
  beforeStart?: (server: { env: NodeJS.ProcessEnv; file: string }) => Promise<void>;
}

/** The real `plant-store serve` over a scratch SQLite file, without rate limits. */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-client-'));
  const file = join(dir, 'plants.db');
  const env = { DATABASE_URL: `sqlite:${file}`, RATE_LIMIT: 'off', ...options.env };
  await options.beforeStart?.({ env, file });
  const server = await startServer(env);
  return {
    url: server.url,
    env,
    token: async (scopes = ['plants:read', 'plants:write'], subject = 'alice') => {
      const r = await runCli(['token', 'create', '--subject', subject, '--scopes', scopes.join(','), '--json'], env);
      if (r.code !== 0) throw new Error(`token create failed: ${r.stderr}`);
      return (JSON.parse(r.stdout) as { token: string }).token;
    },
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A URL where nothing listens: a port that was free a moment ago. */
export async function closedPortUrl(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return `http://127.0.0.1:${port}`;
}

/** A fetch that records what it sends, then sends it. */
export function recordingFetch(): { fetch: typeof fetch; sent: Array<{ method: string; url: URL; body?: string }> } {
  const sent: Array<{ method: string; url: URL; body?: string }> = [];
  return {
    sent,
    fetch: (input, init) => {
      const url = new URL(input instanceof Request ? input.url : input);
      const body = typeof init?.body === 'string' ? init.body : undefined;
      sent.push({ method: init?.method ?? 'GET', url, ...(body === undefined ? {} : { body }) });
      return fetch(input, init);
    },
  };
}
