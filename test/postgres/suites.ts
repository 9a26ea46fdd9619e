import { readdirSync } from 'node:fs';
import { after } from 'node:test';
import { stopSharedPostgres } from '../support/postgres.js';

/**
 * Runs every suite of a folder of HTTP tests again, unchanged, on PostgreSQL
 * (docs/conventions.md#tests: one contract suite over every engine). Each file here is its own test
 * process, so setting the engine before the suites load affects only them.
 *
 * `engineFree` names the files of the folder that never reach a store (pure units: the address
 * policy, the sender, the signing), or reach one only to read what no engine changes (the OpenAPI
 * document). They are not run again here: they would only repeat, and a
 * file-wide hook of one (webhook-api's DNS guard) would reach the others in this one process.
 */
export async function onPostgres(folder: string, engineFree: readonly string[] = []): Promise<void> {
  process.env.TEST_ENGINE = 'postgres';
  after(stopSharedPostgres);
  const dir = new URL(`../${folder}/`, import.meta.url);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts') && !engineFree.includes(f))
    .sort();
  if (files.length === 0) throw new Error(`no suites in test/${folder}`);
  for (const file of files) await import(new URL(file, dir).href);
}
