import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { describeDatabase, loadConfig } from '../config.js';
import { io } from './io.js';
import type { BackupResult } from '../store/sqlite/snapshot.js';
import { Progress, formatCount } from '../transfer/progress.js';
import { parseCommand } from './args.js';
import { databaseLine } from './database.js';
import { UsageError, err } from './output.js';

/** On a non-terminal, a progress line every this many pages at least (100 MiB of 4 KiB pages). */
const LINE_EVERY_PAGES = 25_600;

function formatBytes(bytes: number): string {
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 'bytes';
  for (const next of units) {
    if (value < 1024) break;
    value /= 1024;
    unit = next;
  }
  return unit === 'bytes' ? `${bytes} bytes` : `${value.toFixed(1)} ${unit}`;
}

/** `plant-store backup <file> [--force]`: exit 0 done, 1 it failed, 2 it cannot be done here (see the usage). */
export async function backupCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand('backup', args, { force: 'boolean' }, { positionals: true });
  if (positionals.length !== 1) throw new UsageError('backup takes one file to write the copy to', 'backup');
  const destination = positionals[0]!;
  const { database } = loadConfig(io().env);
  if (database.engine === 'postgres') {
    // The server's own tool is the right one: it copies every table at one snapshot, on any size.
    err(
      'plant-store: backup copies SQLite databases. Back up PostgreSQL with pg_dump, for example\n' +
        `  pg_dump --format=custom --file=plant-store.dump '${describeDatabase(database)}'\n` +
        'and restore with pg_restore (docs/operations.md); `plant-store export` copies the plants of either engine.',
    );
    return 2;
  }
  if (database.path === ':memory:') {
    err('plant-store: DATABASE_URL is sqlite::memory:, which has nothing to back up');
    return 2;
  }
  if (!existsSync(database.path)) {
    err(
      `plant-store: there is no database at ${describeDatabase(database)} (${resolve(database.path)}): check DATABASE_URL`,
    );
    return 2;
  }
  err(databaseLine(database));
  let progress: Progress | undefined;
  const onProgress = (copied: number, total: number): void => {
    progress ??= new Progress(io().stderr, `of ${formatCount(total)} pages`, {
      totalBytes: total,
      lineEvery: Math.max(LINE_EVERY_PAGES, Math.ceil(total / 10)),
    });
    progress.update(copied, copied);
  };
  // SQLite's driver loads here, once the arguments and the database were checked.
  const { BackupRefusedError, backupSqlite } = await import('../store/sqlite/snapshot.js');
  let copied: BackupResult;
  try {
    copied = await backupSqlite(database.path, destination, { overwrite: values.force === true, onProgress });
  } catch (error) {
    if (!(error instanceof BackupRefusedError)) throw error;
    err(`plant-store: ${error.message}`);
    return 2;
  }
  (progress ?? new Progress(io().stderr, 'pages')).finish(
    `Backed up ${describeDatabase(database)} to ${destination}: ${formatBytes(copied.bytes)} ` +
      `(${formatCount(copied.pages)} pages)`,
  );
  return 0;
}
