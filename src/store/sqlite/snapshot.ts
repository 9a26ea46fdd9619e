import { closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { FolderError, makeFolder } from './folder.js';
import { FIRST_ID, LAST_ID, type PlantRecord } from '../store.js';

// One snapshot of a SQLite file, read page by page (`plant-store export`) or copied whole
// (`plant-store backup`), on a read-only connection of its own. The store's own connection serves
// the server's writes (GroupCommit): a transaction held open on it across pages would take those
// writes in. In WAL mode a reader blocks no writer; while it reads, checkpoints stop short of its
// snapshot, so the -wal file grows until it is done.

const BUSY_TIMEOUT_MS = 5000;

/**
 * A read-only connection inside a read transaction that has taken its snapshot: BEGIN is
 * deferred, so the first read takes it, and every read after sees that same state until the
 * connection ends the transaction (COMMIT, or close).
 */
function openSnapshot(path: string): Database.Database {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.exec('BEGIN');
    db.prepare('SELECT count(*) FROM sqlite_schema').get();
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** Every plant of the file at `path`, in id order, `pageSize` at a time, all from one snapshot. */
export async function* snapshotPages(path: string, pageSize: number): AsyncGenerator<readonly PlantRecord[]> {
  const db = openSnapshot(path);
  try {
    const list = db
      .prepare('SELECT id, owner, name, tag FROM plants WHERE id >= ? ORDER BY id LIMIT ?')
      .safeIntegers(true);
    let fromId = FIRST_ID;
    for (;;) {
      const page = list.all(fromId, pageSize) as PlantRecord[];
      if (page.length > 0) yield page;
      const last = page.at(-1);
      if (page.length < pageSize || last === undefined || last.id === LAST_ID) return;
      fromId = last.id + 1n;
    }
  } finally {
    db.close(); // ends the read transaction, also when the reader stopped early
  }
}

/** A backup that was not started, and why: the destination is taken or is the database itself. */
export class BackupRefusedError extends Error {
  override name = 'BackupRefusedError';
}

export interface BackupOptions {
  /** Replace a file already at the destination (atomically, by rename); otherwise refuse. */
  readonly overwrite?: boolean;
  /** Pages copied per step; between steps the event loop runs and progress is reported. */
  readonly pagesPerStep?: number;
  /** After each step: pages copied so far, of the snapshot's total. */
  readonly onProgress?: (copied: number, total: number) => void;
}

export interface BackupResult {
  readonly pages: number;
  /** The copy's size on disk. */
  readonly bytes: number;
}

const PAGES_PER_STEP = 4096; // 16 MiB of 4 KiB pages

function fsyncPath(path: string, flags: string): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Copies the SQLite database at `source` to `destination` while other connections and processes
 * go on writing it, through SQLite's online backup API (sqlite3_backup_*, via better-sqlite3).
 *
 * The copy is the database at one instant: the instant the backup starts. The backup API copies
 * from its source connection's read transaction, and when that connection holds one open across
 * every step, a commit of another connection is neither copied nor noticed; without it, each step
 * would read the latest state and a commit by another connection would restart the copy from page
 * 1 (under steady writes, possibly again and again).
 *
 * The copy is written beside the destination (`<destination>.partial-<pid>`), fsynced, then put in
 * place: by link(2), which refuses an existing file atomically, or with `overwrite` by rename(2).
 * An interrupted backup never leaves a half-written file under the destination's name.
 */
export async function backupSqlite(
  source: string,
  destination: string,
  { overwrite = false, pagesPerStep = PAGES_PER_STEP, onProgress }: BackupOptions = {},
): Promise<BackupResult> {
  if (resolve(destination) === resolve(source)) {
    throw new BackupRefusedError(`${destination} is the database itself: give the copy another name`);
  }
  if (existsSync(destination)) {
    if (!overwrite) throw new BackupRefusedError(`${destination} exists: give another name, or --force to replace it`);
    // A -wal file beside it: the database there is open or was not closed cleanly, and SQLite would
    // apply that stale log to the new copy when it opens it.
    if (existsSync(`${destination}-wal`)) {
      throw new BackupRefusedError(
        `${destination} looks like a database in use (${destination}-wal exists): stop what uses it, or choose another name`,
      );
    }
  }
  try {
    makeFolder(dirname(destination));
  } catch (error) {
    if (!(error instanceof FolderError)) throw error;
    throw new BackupRefusedError(`${error.message}: give a file in a folder this process can create or write`);
  }
  const partial = `${destination}.partial-${process.pid}`;
  const db = openSnapshot(source);
  try {
    const done = await db.backup(partial, {
      progress: ({ totalPages, remainingPages }) => {
        onProgress?.(totalPages - remainingPages, totalPages);
        return pagesPerStep;
      },
    });
    db.close();
    fsyncPath(partial, 'r+');
    if (overwrite) renameSync(partial, destination);
    else {
      try {
        linkSync(partial, destination);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        throw new BackupRefusedError(`${destination} exists: give another name, or --force to replace it`);
      }
      rmSync(partial);
    }
    fsyncPath(dirname(destination), 'r'); // the new name survives a crash too
    onProgress?.(done.totalPages, done.totalPages);
    return { pages: done.totalPages, bytes: statSync(destination).size };
  } finally {
    if (db.open) db.close();
    rmSync(partial, { force: true });
    rmSync(`${partial}-journal`, { force: true });
  }
}
