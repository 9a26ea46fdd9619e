import { once } from 'node:events';
import { INT64_MAX, INT64_MIN } from '../http/validation.js';
import type { PlantStore } from '../store/store.js';
import { formatLine } from './plant-line.js';
import type { Progress } from './progress.js';

const PAGE = 5000;

/** Writes every plant, in id order, as NDJSON; reads the store a page at a time, whatever its size. */
export async function exportPlants(
  store: PlantStore,
  out: NodeJS.WritableStream,
  progress?: Progress,
): Promise<number> {
  let written = 0;
  let fromId = INT64_MIN;
  for (;;) {
    const page = await store.listPlants({ owner: null, tag: null, fromId, limit: PAGE });
    if (page.length > 0 && !out.write(page.map(formatLine).join(''))) await once(out, 'drain');
    written += page.length;
    progress?.update(written);
    const last = page[page.length - 1];
    if (page.length < PAGE || last === undefined || last.id === INT64_MAX) return written;
    fromId = last.id + 1n;
  }
}
