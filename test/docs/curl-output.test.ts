import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { userDocs } from './markdown.js';

// docs/events.md showed `# 201 {…}` under `curl -s`, which prints the body
// alone. What a printed curl shows under it is what that curl prints: a status line or a bare
// status only from a curl that writes it (`-i`, `-I`, `-D -`, or `-w` with `%{http_code}`).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = [...userDocs(ROOT)];

/** Each curl command of a shell block (continuation lines joined) and the comment lines right under it. */
function curlsWithOutput(text: string): Array<{ command: string; shown: string[] }> {
  const found: Array<{ command: string; shown: string[] }> = [];
  for (const block of text.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)\n```/gm)) {
    const lines = block[1]!.split('\n');
    for (let i = 0; i < lines.length; i++) {
      if (!/(^|[\s($])curl\s/.test(lines[i]!) || lines[i]!.trimStart().startsWith('#')) continue;
      let command = lines[i]!;
      while (command.endsWith('\\') && i + 1 < lines.length) command = `${command.slice(0, -1)} ${lines[++i]!}`;
      const shown: string[] = [];
      while (i + 1 < lines.length && lines[i + 1]!.startsWith('#')) shown.push(lines[++i]!);
      found.push({ command, shown });
    }
  }
  return found;
}

/** Whether a curl command line writes the answer's status to stdout. */
const printsStatus = (command: string): boolean =>
  /\s-[a-zA-Z]*[iI][a-zA-Z]*\s|\s--include\s|\s--head\s|\s-D\s*-\s|%\{(?:http_code|response_code)\}/.test(
    `${command} `,
  );

test('a status shown under a printed curl is one that curl prints', () => {
  const wrong: string[] = [];
  let checked = 0;
  for (const doc of DOCS) {
    for (const { command, shown } of curlsWithOutput(readFileSync(join(ROOT, doc), 'utf8'))) {
      checked += 1;
      const first = shown[0]?.replace(/^#\s*(→\s*)?/, '') ?? '';
      if (/^(HTTP\/[\d.]+ )?[1-5]\d\d\b/.test(first) && !printsStatus(command))
        wrong.push(`${doc}: ${command} → ${first}`);
    }
  }
  assert.ok(checked > 10, `found the docs' curl commands (${checked})`);
  assert.deepEqual(wrong, []);
});

test('the check tells a curl that prints its status from one that does not', () => {
  assert.equal(printsStatus('curl -s localhost:8080/plants'), false);
  assert.equal(printsStatus('curl -sS -X POST localhost:8080/webhooks -H "X: y"'), false);
  assert.equal(printsStatus('curl -si localhost:8080/plants'), true);
  assert.equal(printsStatus('curl -i localhost:8080/plants'), true);
  assert.equal(printsStatus(`curl -s -o /dev/null -w '%{http_code}\\n' localhost:8080/plants`), true);
  assert.equal(printsStatus('curl -s -D - localhost:8080/plants'), true);
});
