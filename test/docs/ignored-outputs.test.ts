import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { userDocs } from './markdown.js';
import { promisify } from 'node:util';

// The examples, run in a checkout, left plants.ndjson untracked (git status
// showed it after `plant-store export > plants.ndjson`). Every file a printed shell command
// writes into the folder it runs in (a `>` redirection, a `plant-store backup` target) is one
// .gitignore ignores, as it does the database (`*.db`).

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const exec = promisify(execFile);

const DOCS = [...userDocs(ROOT)];

/** The shell lines of a Markdown text's ```sh and ```bash blocks. */
function shellLines(text: string): string[] {
  return [...text.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)\n```/gm)].flatMap((m) =>
    m[1]!.split('\n').filter((line) => !line.trimStart().startsWith('#')),
  );
}

/** The relative paths a line writes: `> path` (not `2>`, `>&`, /dev/…), curl's `-D`/`-o path`, `plant-store backup path`. */
function written(line: string): string[] {
  const code = line
    .replace(/\s#.*$/, '')
    .replaceAll('$(date +%F)', '2026-05-01')
    .replace(/'[^']*'|"[^"]*"/g, '$QUOTED'); // quoted text: an argument, or a path the line chooses at run time
  const paths = [
    ...code.matchAll(/(?<![0-9&>])>\s*([^\s&|;>()]+)/g),
    // curl's options only: `install -o root` names an owner, not a file.
    ...(/(^|[\s|;&(])curl\s/.test(code) ? code.matchAll(/\s(?:-D|-o|--dump-header|--output)\s+([^\s]+)/g) : []),
    ...code.matchAll(/plant-store backup\s+([^\s<]+)/g),
  ];
  return paths
    .map((m) => m[1]!)
    .filter((path) => !path.startsWith('/') && !path.startsWith('$') && !path.startsWith('-'));
}

test('every file a printed command writes into a checkout is ignored by git', async () => {
  const outputs = new Map<string, string>();
  for (const doc of DOCS) {
    for (const line of shellLines(readFileSync(join(ROOT, doc), 'utf8'))) {
      for (const path of written(line)) outputs.set(path, `${doc}: ${line.trim()}`);
    }
  }
  assert.ok(outputs.has('plants.ndjson'), 'docs/cli.md exports to plants.ndjson');
  const tracked = [];
  for (const [path, where] of outputs) {
    try {
      await exec('git', ['check-ignore', '--quiet', '--no-index', path], { cwd: ROOT });
    } catch {
      tracked.push(`${path} (${where})`);
    }
  }
  assert.deepEqual(tracked, [], 'files that git status would show after running the examples');
});
