import { chmodSync, copyFileSync, linkSync, mkdirSync, readdirSync, readlinkSync, symlinkSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

/**
 * Mirrors `from` at `to` for a process of another user, whatever folder `from` sits in: folders
 * made world-traversable (0755, whatever the umask), files hard-linked (copied across file
 * systems), symbolic links kept as they are. A test that runs something as another user from this
 * checkout's files gives it such a mirror in a folder of its own: a checkout in a private folder
 * (0700, as any under /root is, or made by `mktemp -d`) lets no other user in. Hard links keep the
 * files' owners and modes: what the checkout lets others read, the mirror does. `skip` leaves an
 * entry (and what it holds) out.
 */
export function mirror(from: string, to: string, skip: (name: string) => boolean = () => false): void {
  folder(to);
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (skip(entry.name)) continue;
    const source = join(from, entry.name);
    const target = join(to, entry.name);
    if (entry.isDirectory()) mirror(source, target, skip);
    else if (entry.isSymbolicLink()) symlinkSync(readlinkSync(source), target);
    else linkOrCopy(source, target);
  }
}

/** A folder every user may enter (0755, whatever the umask), made with its parents when missing. */
export function folder(path: string): void {
  const first = mkdirSync(path, { recursive: true, mode: 0o755 });
  if (first === undefined) return chmodSync(path, 0o755);
  let at = first;
  chmodSync(at, 0o755);
  for (const part of relative(first, path).split(sep).filter(Boolean)) chmodSync((at = join(at, part)), 0o755);
}

/** `source` hard-linked at `target`, or copied where they are on different file systems. */
export function linkOrCopy(source: string, target: string): void {
  try {
    linkSync(source, target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    copyFileSync(source, target);
  }
}
