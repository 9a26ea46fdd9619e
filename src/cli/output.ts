// What every subcommand of the plant-store command shares: its two streams, tables, usage errors.
import { io } from './io.js';

/**
 * A mistake in how the command was called: the message, then the usage of `command` (as the usage
 * names it: `plants create`), go to stderr and the exit code is 2.
 */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}

export const out = (text: string): void => void io().stdout.write(`${text}\n`);
export const err = (text: string): void => void io().stderr.write(`${text}\n`);

/**
 * A reader that stops early (`plant-store export | head -1`) closes the pipe. Node ignores SIGPIPE,
 * which ends other commands quietly there, and reports EPIPE on the next write instead: a stack
 * trace, or "write EPIPE" and exit 1. The reader has what it wanted and nothing more can
 * be written, so the command ends at once with exit 0. An unwritable stderr is ignored: there is
 * nowhere left to say anything. Not for `serve`, whose logs do not go through process.stdout.
 */
export function endQuietlyWhenStdoutCloses(): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    process.exit(0);
  });
  process.stderr.on('error', () => {});
}

/** `rows` aligned in columns, each as wide as `widths` says (by default: its widest cell). */
export function table(
  rows: string[][],
  widths: readonly number[] = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length))),
): string {
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
