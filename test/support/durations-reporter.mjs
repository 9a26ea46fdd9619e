// @ts-check
/**
 * A reporter for node's test runner that adds up the time of each test file: the sum of its
 * top-level tests' durations (a file's tests run one after another; its start-up is not counted).
 * `npm test` (test/run.ts) writes its output to test-output/durations-<suite>.txt, slowest file first,
 * which is how docs/testing.md's table of durations is made. Plain JavaScript: the runner loads
 * reporters before any TypeScript loader.
 */
import { relative } from 'node:path';

/** @param {AsyncIterable<{ type: string, data: { nesting: number, file?: string, details?: { duration_ms?: number } } }>} source */
export default async function* durations(source) {
  /** @type {Map<string, { ms: number, tests: number }>} */
  const files = new Map();
  for await (const event of source) {
    if ((event.type !== 'test:pass' && event.type !== 'test:fail') || event.data.nesting !== 0) continue;
    const file = event.data.file ? relative(process.cwd(), event.data.file) : '(unknown)';
    const entry = files.get(file) ?? { ms: 0, tests: 0 };
    entry.ms += event.data.details?.duration_ms ?? 0;
    entry.tests += 1;
    files.set(file, entry);
  }
  const rows = [...files].sort((a, b) => b[1].ms - a[1].ms);
  const total = rows.reduce((sum, [, entry]) => sum + entry.ms, 0);
  yield `# seconds\ttop-level tests\tfile (sum ${(total / 1000).toFixed(1)} s over ${rows.length} files)\n`;
  for (const [file, entry] of rows) yield `${(entry.ms / 1000).toFixed(1)}\t${entry.tests}\t${file}\n`;
}
