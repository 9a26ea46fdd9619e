// plant-store export|import: every plant as NDJSON, straight from and into the database. The
// NDJSON's reader and writer (the plant schema's validator) load once the arguments are read: a
// usage mistake answers without them.
import { createReadStream, statSync } from 'node:fs';
import { Progress, formatCount } from '../transfer/progress.js';
import { parseCommand } from './args.js';
import { withStore } from './database.js';
import { io } from './io.js';
import { UsageError, err } from './output.js';

const MAX_PROBLEMS_SHOWN = 50;

export async function exportCommand(args: string[]): Promise<number> {
  parseCommand('export', args, {});
  const { exportPlants } = await import('../transfer/export.js');
  const written = await withStore((store) =>
    exportPlants(store, io().stdout, new Progress(io().stderr, 'plants', { lineEvery: 100_000 })),
  );
  err(`Exported ${formatCount(written)} plants.`);
  return 0;
}

export async function importCommand(args: string[]): Promise<number> {
  const command = 'import';
  const { positionals } = parseCommand(command, args, {}, { positionals: true });
  if (positionals.length !== 1) throw new UsageError('import takes one file of NDJSON plants, or - for stdin', command);
  const source = positionals[0]!;
  let totalBytes: number | undefined;
  if (source !== '-') {
    try {
      totalBytes = statSync(source).size;
    } catch (error) {
      const reason =
        (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'there is no such file' : (error as Error).message;
      throw new UsageError(`cannot read ${source}: ${reason}; give an NDJSON file, or - to read stdin`, command);
    }
  }
  const { importPlants } = await import('../transfer/import.js');
  const input = source === '-' ? io().stdin : createReadStream(source);
  const progress = new Progress(io().stderr, 'lines', { totalBytes });
  const summary = await withStore((store) => importPlants(input, store, { progress, maxProblems: MAX_PROBLEMS_SHOWN }));
  const problems = summary.invalid + summary.conflicts;
  for (const problem of summary.problems) err(`line ${problem.line}: ${problem.message}`);
  if (problems > summary.problems.length) err(`… and ${formatCount(problems - summary.problems.length)} more problems`);
  progress.finish(
    `Imported ${formatCount(summary.imported)} plants; ${formatCount(summary.unchanged)} unchanged, ` +
      `${formatCount(summary.conflicts)} conflicting, ${formatCount(summary.invalid)} invalid ` +
      `(${formatCount(summary.lines)} lines)`,
  );
  return problems > 0 ? 1 : 0;
}
