import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** A folder that cannot be made: the message says which and why; `code` is the system's (ENOENT, EACCES, ENOTDIR…). */
export class FolderError extends Error {
  override name = 'FolderError';
  readonly code: string | undefined;
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.code = (cause as NodeJS.ErrnoException | undefined)?.code;
  }
}

/**
 * Makes `folder` and its missing parents, each with one mkdir(2), or throws a FolderError naming the
 * folder that could not be made. Not mkdirSync's `recursive`: on a path whose parent exists but
 * takes no new entry and answers ENOENT (`/proc/x`), Node 20 retries it for ever, at most of a core,
 * deaf to SIGTERM since it never returns to the event loop.
 */
export function makeFolder(folder: string): void {
  const missing: string[] = [];
  for (let at = resolve(folder); ;) {
    let isFolder: boolean;
    try {
      isFolder = statSync(at).isDirectory();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // ENOTDIR: a parent is a file, found further up.
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || dirname(at) === at) {
        throw new FolderError(`cannot reach the folder ${at} (${(error as Error).message})`, error);
      }
      missing.push(at);
      at = dirname(at);
      continue;
    }
    if (!isFolder) {
      const error = Object.assign(new Error(`${at} is a file`), { code: 'ENOTDIR' });
      throw new FolderError(`cannot make the folder ${missing.at(-1) ?? at}: ${at} is a file, not a folder`, error);
    }
    break;
  }
  for (const at of missing.reverse()) {
    try {
      mkdirSync(at);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && statSync(at).isDirectory()) continue; // made meanwhile
      throw new FolderError(`cannot make the folder ${at} (${(error as Error).message})`, error);
    }
  }
}
