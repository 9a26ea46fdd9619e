import pino from 'pino';

/** What the log lines are written to: stdout in the server, a collector in tests. */
export interface LogSink {
  write(lines: string): unknown;
}

/**
 * The most bytes written at once. Linux writes up to PIPE_BUF (4096) bytes to a pipe atomically:
 * the workers of `--workers` share the primary's stdout, and a larger write to a full pipe goes
 * in parts, between which another process's lines could land, cutting a line in two.
 */
const ATOMIC_WRITE = 4096;

/**
 * The log's destination: the lines written during one event-loop turn go out together, in as few
 * writes as fit whole lines into 4 KiB each, when the turn ends (setImmediate), instead of one
 * write(2) per line. Under load a turn answers many requests, and a write per request line cost
 * more than building it (BENCHMARKS.md).
 *
 * A line is never held past the turn it was written in, and the order is kept. What is pending
 * when the process exits (a crash by an exception included) is written then; a process killed
 * outright (SIGKILL, an out-of-memory abort) loses its last turn's lines, at most 4 KiB.
 */
export class TurnLogStream {
  private pending = '';
  private pendingBytes = 0;
  private scheduled = false;

  constructor(private readonly sink: LogSink) {}

  write(line: string): boolean {
    const bytes = Buffer.byteLength(line);
    if (this.pendingBytes + bytes > ATOMIC_WRITE) this.flush();
    this.pending += line;
    this.pendingBytes += bytes;
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.turnEnded);
    }
    return true;
  }

  /** Writes what is pending now; pino's `logger.flush(callback)` calls it with a callback. */
  flush(callback?: () => void): void {
    if (this.pending !== '') {
      const lines = this.pending;
      this.pending = '';
      this.pendingBytes = 0;
      this.sink.write(lines);
    }
    callback?.();
  }

  private readonly turnEnded = (): void => {
    this.scheduled = false;
    this.flush();
  };
}

let stdout: TurnLogStream | undefined;

/**
 * The process's one log stream to stdout, shared by every app in it. Its writes are synchronous
 * (pino's SonicBoom), so what is pending when the process exits, by a crash too, is written then.
 */
export function stdoutLogStream(): TurnLogStream {
  if (!stdout) {
    const stream = new TurnLogStream(pino.destination({ dest: 1, sync: true }));
    process.once('exit', () => stream.flush());
    stdout = stream;
  }
  return stdout;
}
