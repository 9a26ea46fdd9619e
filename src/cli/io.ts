import { AsyncLocalStorage } from 'node:async_hooks';
import type { Readable } from 'node:stream';

// Where a command reads its settings and writes its output: the process's environment and streams,
// or, for a run of the command inside another program (the tests: runCommand in a test's own
// process costs none of a process's start), the ones that program gives.

type Stream = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

export interface CommandIo {
  readonly env: NodeJS.ProcessEnv;
  readonly stdin: Readable;
  readonly stdout: Stream;
  readonly stderr: Stream;
}

const PROCESS_IO: CommandIo = {
  get env() {
    return process.env;
  },
  get stdin() {
    return process.stdin;
  },
  get stdout() {
    return process.stdout;
  },
  get stderr() {
    return process.stderr;
  },
};

const given = new AsyncLocalStorage<CommandIo>();

/** The environment and streams of the command running now. */
export const io = (): CommandIo => given.getStore() ?? PROCESS_IO;

/** Runs `work` (a command) with `streams` as its environment and streams. */
export const withIo = <T>(streams: CommandIo, work: () => Promise<T>): Promise<T> => given.run(streams, work);
