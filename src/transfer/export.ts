import { once } from 'node:events';
import type { PlantStore } from '../store/store.js';
import { formatLine } from './plant-line.js';
import type { Progress } from './progress.js';

const PAGE = 5000;

/**
 * Writes every plant, in id order, as NDJSON: the store at one instant (one snapshot, read a page
 * at a time whatever its size), however many writes commit while it runs.
 */
export async function exportPlants(
  store: PlantStore,
  out: NodeJS.WritableStream,
  progress?: Progress,
  { pageSize = PAGE }: { readonly pageSize?: number } = {},
): Promise<number> {
  let written = 0;
  for await (const page of store.snapshotPlants(pageSize)) {
    if (!out.write(page.map(formatLine).join(''))) await once(out, 'drain');
    written += page.length;
    progress?.update(written);
  }
  return written;
}
