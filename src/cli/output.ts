// What every subcommand of the plant-store command shares: its two streams, tables, usage errors.

/** A mistake in how the command was called: usage goes to stderr and the exit code is 2. */
export class UsageError extends Error {}

export const out = (text: string): void => void process.stdout.write(`${text}\n`);
export const err = (text: string): void => void process.stderr.write(`${text}\n`);

export function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
