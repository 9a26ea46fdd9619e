import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { userDocs } from './markdown.js';

// Every command the docs print works in a checkout and answers at once. Their
// shell blocks print `plant-store …` (this checkout's bin/ on the PATH, as README.md and
// docs/cli.md say once), never `npx plant-store …`, which took 1 to 4 s a command; and a token
// caught into a variable is never `export NAME="$(…)"`, whose `export` exits 0 when the command
// fails and leaves an empty token (test/cli/checkout-command.test.ts runs the printed form).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = [...userDocs(ROOT)];

/** The lines of every shell block of `text`, with their line numbers in the file. */
function shellLines(text: string): Array<{ line: string; at: number }> {
  const found: Array<{ line: string; at: number }> = [];
  for (const block of text.matchAll(/^```(?:sh|bash|shell|console)?\n([\s\S]*?)\n```/gm)) {
    const first = text.slice(0, block.index).split('\n').length + 1;
    block[1]!.split('\n').forEach((line, i) => found.push({ line, at: first + i }));
  }
  return found;
}

const code = (line: string): string => line.replace(/(^|\s)#.*$/, ''); // without a trailing comment

test('no shell block of the docs runs plant-store through npx', () => {
  const slow = DOCS.flatMap((doc) =>
    shellLines(readFileSync(join(ROOT, doc), 'utf8'))
      .filter(({ line }) => /(^|[\s($|;&])npx\s+plant-store\b/.test(code(line)))
      .map(({ line, at }) => `${doc}:${at}: ${line}`),
  );
  assert.deepEqual(slow, []);
});

test('no shell block of the docs exports a command substitution (its failure would leave an empty value)', () => {
  const masked = DOCS.flatMap((doc) =>
    shellLines(readFileSync(join(ROOT, doc), 'utf8'))
      .filter(({ line }) => /(^|[\s;&])(export|local|readonly|declare)\s+[A-Za-z_]\w*="?\$\(/.test(code(line)))
      .map(({ line, at }) => `${doc}:${at}: ${line}`),
  );
  assert.deepEqual(masked, []);
});
