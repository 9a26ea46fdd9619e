import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

/** The package's command, as `npx plant-store` and `npm start` run it (compiled by `npm test` first). */
export const BIN = fileURLToPath(new URL('../bin/plant-store.js', import.meta.url));

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function runCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, cwd }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Everything the server has written to stdout (its JSON logs) so far. */
  logs(): string;
  /** Sends SIGTERM and answers the exit code. */
  stop(): Promise<number | null>;
}

/** Starts `plant-store serve` on a free port and waits until every worker logs where it listens. */
export async function startServer(
  env: NodeJS.ProcessEnv,
  cwd?: string,
  args: string[] = [],
  { detached = false } = {},
): Promise<ServerProcess> {
  const workersAt = args.indexOf('--workers');
  const listeners = workersAt >= 0 ? Number(args[workersAt + 1]) : 1;
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', ...env },
    cwd,
    detached, // its own process group, for tests that signal the whole group
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let errors = '';
  child.stdout.on('data', (chunk: Buffer) => void (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => void (errors += chunk.toString()));
  let deadline: NodeJS.Timeout | undefined;
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (): void => {
      const m = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m && out.split('Server listening at').length - 1 >= listeners) {
        child.stdout.off('data', onData);
        clearTimeout(deadline); // it listens: the deadline must not kill it later
        resolve(m[1]!);
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${errors}${out}`)));
    // A server that never says where it listens fails the test instead of hanging it.
    deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not listen within 30 s: ${errors}${out}`));
    }, 30_000).unref();
  });
  return {
    child,
    url,
    logs: () => out,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode; // already gone (killed)
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      return code;
    },
  };
}

/** The exit code, or a failure when the process is still running `ms` from now: a deadline, not a speed. */
export async function exitWithin(server: ServerProcess, ms: number): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the server did not exit within ${ms} ms of SIGTERM`)), ms);
  });
  try {
    const [code] = (await Promise.race([once(server.child, 'exit'), late])) as [number | null];
    return code;
  } finally {
    clearTimeout(timer);
  }
}

export interface ApiAnswer {
  readonly status: number;
  readonly text: string;
  readonly headers: Headers;
}

/** One API request to a server process with a bearer token; a body is sent as JSON. */
export async function callServer(
  server: ServerProcess,
  token: string,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<ApiAnswer> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body,
  });
  return { status: response.status, text: await response.text(), headers: response.headers };
}
