import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Readable, Writable } from 'node:stream';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';
import { withIo } from '../src/cli/io.js';
import { runCommand } from '../src/cli/main.js';

/** The package's command, as `npx plant-store` and `npm start` run it (compiled by `npm test` first). */
export const BIN = fileURLToPath(new URL('../bin/plant-store.js', import.meta.url));

/**
 * Processes a test started that must not outlive its test file. Node runs a test's after-hooks in
 * the order they were registered and skips the rest when one throws: a failed cleanup (a schema's
 * drop, registered before the server's stop) once left a server running, which kept its file's
 * process, the test run and CI waiting until CI's 90 minutes ran out. So what is still running
 * when the file's tests are over is killed by its pid: in a root-level after-hook (it runs however
 * the tests and their hooks ended) under the test runner, and as the process exits otherwise.
 */
const running = new Set<ChildProcess>();
const killLeftovers = (): void => {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
};
process.once('exit', killLeftovers);
if (process.env.NODE_TEST_CONTEXT !== undefined) after(killLeftovers);

/** Kills `child` when this test file's process exits, if it still runs then. */
export function reapAtExit(child: ChildProcess): void {
  running.add(child);
  child.once('exit', () => running.delete(child));
}

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `plant-store <args>` with `env` over this process's environment: what it printed and its exit
 * code. Run in this test's own process (runCommand, on streams of its own) unless it must be a
 * process: `serve` (a server that fails to start ends its process), or a working folder of its own
 * (`cwd`). A process of the command costs 0.3 to 0.9 s of CPU to start (Node, then the modules a
 * command loads), and the CLI's tests run hundreds: as processes they took half of `npm test`'s
 * time on a slow host. The command as a process is proven by the tests that run it through
 * runCliProcess, `npx plant-store` (test/cli/npx.test.ts) and a shell (as-printed, walkthrough).
 */
export function runCli(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<CliResult> {
  return args[0] === 'serve' || cwd !== undefined ? runCliProcess(args, env, cwd) : runCliHere(args, env);
}

/**
 * The secret of a token minted with the CLI (`token create --json`), for a test that needs a token
 * and not what the command prints: a failed mint fails here, with the command's stderr, rather
 * than as a JSON parse error or a 401 later. `cwd` runs it as a process in that folder (runCli).
 */
export async function mintCliToken(
  env: NodeJS.ProcessEnv,
  subject = 'alice',
  scopes = 'plants:read,plants:write',
  cwd?: string,
): Promise<string> {
  const minted = await runCli(['token', 'create', '--subject', subject, '--scopes', scopes, '--json'], env, cwd);
  assert.equal(minted.code, 0, `token create for ${subject} (${scopes}): ${minted.stderr}`);
  return (JSON.parse(minted.stdout) as { token: string }).token;
}

/** `plant-store <args>` as a process of its own (`node bin/plant-store.js`), as users run it. */
export function runCliProcess(args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, cwd }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** `plant-store <args>` in this process: the command's own code, on streams that collect what it says. */
async function runCliHere(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const collect = (add: (text: string) => void): Writable =>
    new Writable({
      write(chunk: Buffer | string, _encoding, done) {
        add(chunk.toString());
        done();
      },
    });
  const streams = {
    env: { ...process.env, ...env },
    stdin: Readable.from([]),
    stdout: collect((text) => void (stdout += text)),
    stderr: collect((text) => void (stderr += text)),
  };
  const code = await withIo(streams, () => runCommand(args));
  return { code, stdout, stderr };
}

/**
 * runCli for a command that may never end (a loop deaf to SIGTERM, as one once was): past `ms`
 * it is killed by its pid with SIGKILL and the answer is a failure that says so and shows its
 * output. A deadline on the test, never a speed asserted.
 */
export function runCliWithin(ms: number, args: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env },
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    reapAtExit(child);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => void (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
    const deadline = setTimeout(() => {
      process.kill(child.pid!, 'SIGKILL');
      reject(new Error(`plant-store ${args.join(' ')} was still running after ${ms} ms: ${stderr}${stdout}`));
    }, ms);
    child.once('close', (code, signal) => {
      clearTimeout(deadline);
      resolve({ code: code ?? (signal === null ? 1 : 128), stdout, stderr });
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

/**
 * Starts `plant-store serve` on a free port and waits until every worker logs where it listens.
 * The overload guard is off unless `env` sets MAX_EVENT_LOOP_DELAY: these tests prove restarts,
 * reloads and deliveries, and on a machine with a core kept busy (`.ci/run`'s second run) a
 * server's event loop can lag a second behind, which the guard answers with 503 by design.
 * test/http/overload.test.ts proves the guard itself.
 * SHUTDOWN_GRACE is 4 s unless `env` sets it, so the Keep-Alive timeout (half of it) is 2 s: with
 * the default 10 s, each stop waited out a client's idle keep-alive connection (fetch keeps them:
 * 3 s a stop, measured). A test whose client must find its connection still open after seconds
 * idle, or that runs deploy/nginx.conf (its upstream keepalive_timeout, 2 s, must stay below the
 * instances'), sets the shipped default.
 */
export async function startServer(
  env: NodeJS.ProcessEnv,
  cwd?: string,
  args: string[] = [],
  { detached = false } = {},
): Promise<ServerProcess> {
  const workersAt = args.indexOf('--workers');
  const listeners = workersAt >= 0 ? Number(args[workersAt + 1]) : 1;
  const child = spawn(process.execPath, [BIN, 'serve', ...args], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', MAX_EVENT_LOOP_DELAY: 'off', SHUTDOWN_GRACE: '4s', ...env },
    cwd,
    detached, // its own process group, for tests that signal the whole group
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  reapAtExit(child);
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
    // A server that never says where it listens fails the test instead of hanging it. A deadline,
    // not a speed: on a 2-core host with a core kept busy and a CI run beside it, a start once
    // took over 30 s, so it is the browser tests' 60 s.
    deadline = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not listen within 60 s: ${errors}${out}`));
    }, 60_000).unref();
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
