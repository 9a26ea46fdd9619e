import { readdirSync } from 'node:fs';
import { after } from 'node:test';
import { stopSharedPostgres } from '../support/postgres.js';

/**
 * Runs every suite of a folder of HTTP tests again, unchanged, on PostgreSQL (STYLE.md §6: one
 * contract suite over every engine). Each file here is its own test process, so setting the
 * engine before the suites load affects only them.
 */
export async function onPostgres(folder: string): Promise<void> {
  process.env.TEST_ENGINE = 'postgres';
  after(stopSharedPostgres);
  const dir = new URL(`../${folder}/`, import.meta.url);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .sort();
  if (files.length === 0) throw new Error(`no suites in test/${folder}`);
  for (const file of files) await import(new URL(file, dir).href);
}
