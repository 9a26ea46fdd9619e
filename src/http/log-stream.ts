import pino from 'pino';

/** What the log lines are written to: stdout in the server, a collector in tests. */
export interface LogSink {
  write(lines: string): unknown;
}

/** Past this many characters pending, the lines go out at once rather than at the turn's end. */
const FLUSH_AT = 64 * 1024;

/**
 * The log's destination: the lines written during one event-loop turn go out together, in one
 * write when the turn ends (setImmediate), instead of one write(2) each. Under load a turn answers
 * many requests, and a write per request line cost more than building it (BENCHMARKS.md).
 *
 * A line is never held past the turn it was written in, so the log is as timely as with a write
 * per line, and in the same order; `flush()` writes what is pending at once (the process's exit).
 */
export class TurnLogStream {
  private pending = '';

  constructor(private readonly sink: LogSink) {}

  write(line: string): boolean {
    if (this.pending === '') setImmediate(this.flush);
    this.pending += line;
    if (this.pending.length >= FLUSH_AT) this.flush();
    return true;
  }

  readonly flush = (): void => {
    if (this.pending === '') return;
    const lines = this.pending;
    this.pending = '';
    this.sink.write(lines);
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
    process.once('exit', stream.flush);
    stdout = stream;
  }
  return stdout;
}
