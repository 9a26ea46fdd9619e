import { isUtf8 } from 'node:buffer';
import type { Readable } from 'node:stream';
import type { PlantRecord, PlantStore } from '../store/store.js';
import { parseLine } from './plant-line.js';
import type { Progress } from './progress.js';

export interface LineProblem {
  readonly line: number;
  readonly message: string;
}

export interface ImportSummary {
  readonly lines: number;
  readonly imported: number;
  readonly unchanged: number;
  /** Lines that are not a valid plant: nothing of them is stored. */
  readonly invalid: readonly LineProblem[];
  /** Valid plants whose id another plant already holds: not stored, nothing overwritten. */
  readonly conflicts: readonly LineProblem[];
}

// One transaction (one fsync) per batch: 50,000 plants measured 2× faster than 5,000 on SQLite.
const BATCH = 50_000;

/**
 * The lines of a stream as bytes (without the line break), so that invalid UTF-8 can be refused:
 * readline would quietly turn it into U+FFFD and store a name nobody sent.
 */
async function* byteLines(input: Readable): AsyncGenerator<Buffer> {
  let carry = Buffer.alloc(0);
  for await (const chunk of input as AsyncIterable<Buffer | string>) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const buffer = carry.length > 0 ? Buffer.concat([carry, bytes]) : bytes;
    let start = 0;
    for (let end = buffer.indexOf(10); end !== -1; end = buffer.indexOf(10, start)) {
      yield buffer.subarray(start, end > start && buffer[end - 1] === 13 ? end - 1 : end);
      start = end + 1;
    }
    carry = Buffer.from(buffer.subarray(start));
  }
  if (carry.length > 0) yield carry;
}

export interface ImportOptions {
  readonly progress?: Progress | undefined;
  readonly batchSize?: number;
}

/**
 * Reads NDJSON plants and stores them in batched transactions. Idempotent: a plant already stored
 * exactly as given counts as unchanged, so running an import twice changes nothing.
 */
export async function importPlants(
  input: Readable,
  store: PlantStore,
  { progress, batchSize = BATCH }: ImportOptions = {},
): Promise<ImportSummary> {
  let lines = 0;
  let imported = 0;
  let unchanged = 0;
  const invalid: LineProblem[] = [];
  const conflicts: LineProblem[] = [];
  let batch: PlantRecord[] = [];
  let lineOf = new Map<PlantRecord, number>();
  let bytes = 0;

  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    const result = await store.insertBatch(batch);
    imported += result.inserted;
    unchanged += result.unchanged;
    for (const plant of result.conflicts) {
      conflicts.push({ line: lineOf.get(plant)!, message: `another plant already has the id ${plant.id}` });
    }
    batch = [];
    lineOf = new Map();
  };

  for await (const raw of byteLines(input)) {
    lines += 1;
    bytes += raw.length + 1;
    if (!isUtf8(raw)) {
      invalid.push({ line: lines, message: 'not valid UTF-8' });
      continue;
    }
    // A byte-order mark before the first line is tolerated, as editors write one.
    const text = lines === 1 ? raw.toString('utf8').replace(/^\uFEFF/, '') : raw.toString('utf8');
    if (text.trim() === '') continue;
    const parsed = parseLine(text);
    if ('error' in parsed) {
      invalid.push({ line: lines, message: parsed.error });
    } else {
      batch.push(parsed);
      lineOf.set(parsed, lines);
      if (batch.length >= batchSize) await flush();
    }
    if (lines % 1000 === 0) progress?.update(lines, bytes);
  }
  await flush();
  progress?.update(lines, bytes);
  return { lines, imported, unchanged, invalid, conflicts };
}
