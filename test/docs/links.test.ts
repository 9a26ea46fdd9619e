import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { type Repository, checkLinks, markdownAnchors, markdownLinks } from './markdown.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The repository as a clone has it: the files git tracks, and the new ones it would add (not
 * ignored), so that a link into dist/, data/ or test-output/ counts as broken.
 */
function workingRepository(): Repository {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  })
    .split('\0')
    .filter((path) => path !== '' && !path.split('/').includes('node_modules') && existsSync(join(ROOT, path)));
  const files = new Set(listed);
  const folders = new Set(
    listed.flatMap((path) =>
      path
        .split('/')
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
    ),
  );
  const markdown = new Map(
    listed
      .filter((path) => path.toLowerCase().endsWith('.md'))
      .map((path) => [path, readFileSync(join(ROOT, path), 'utf8')]),
  );
  return {
    markdown,
    kind: (path) =>
      files.has(path) && statSync(join(ROOT, path)).isFile() ? 'file' : folders.has(path) ? 'folder' : undefined,
    read: (path) => (files.has(path) ? readFileSync(join(ROOT, path), 'utf8') : undefined),
  };
}

/** A repository made of the given Markdown files (and other files), for checking the checker. */
function fakeRepository(markdown: Record<string, string>, others: string[] = []): Repository {
  const files = new Set([...Object.keys(markdown), ...others]);
  const folders = new Set(
    [...files].flatMap((path) =>
      path
        .split('/')
        .slice(0, -1)
        .map((_, i, parts) => parts.slice(0, i + 1).join('/')),
    ),
  );
  return {
    markdown: new Map(Object.entries(markdown)),
    kind: (path) => (files.has(path) ? 'file' : folders.has(path) ? 'folder' : undefined),
    read: (path) => markdown[path],
  };
}

describe("the repository's Markdown links", () => {
  it('resolve, every one: relative links and images to files of the repository, anchors to headings, none outside it', (t) => {
    const repo = workingRepository();
    assert.ok(
      repo.markdown.has('README.md') && repo.markdown.has('docs/README.md'),
      'README.md and docs/README.md exist',
    );
    const report = checkLinks(repo);
    t.diagnostic(`${repo.markdown.size} Markdown files, ${report.checked} relative links good`);
    for (const link of report.external) t.diagnostic(`external: ${link}`);
    assert.deepEqual(report.problems, [], `broken links:\n${report.problems.join('\n')}`);
    assert.ok(report.checked > 100, `only ${report.checked} relative links were found: the link reader is broken`);
  });

  it('README.md stays a front page: at most about 150 lines, npm test as its test command, a map into docs/', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const lines = readme.split('\n').length;
    assert.ok(lines <= 160, `README.md has ${lines} lines; move the details into docs/`);
    assert.match(readme, /^npm test\b/m, 'the README shows `npm test`, the command CI runs');
    const docs = new Set(markdownLinks(readme).map((link) => link.target.split('#', 1)[0]));
    for (const page of ['docs/README.md', 'docs/api.md', 'docs/architecture.md', 'docs/decisions.md']) {
      assert.ok(docs.has(page), `README.md links ${page}`);
    }
  });
});

describe('the link checker', () => {
  const check = (markdown: Record<string, string>, others: string[] = []): string[] =>
    checkLinks(fakeRepository(markdown, others)).problems;

  it('accepts links to files, folders, headings and HTML anchors, here and in other files', () => {
    const problems = check(
      {
        'README.md': [
          '# Plant Store',
          'See [the API](docs/api.md#int64-ids), [scopes](docs/api.md#scopes-plantsadmin-included), [deploy](deploy/),',
          '![logo](docs/logo.png "Logo"), [same file](#run-it), [twice](#run-it-1), [html](#top) and [ref].',
          '## Run it',
          '## Run it',
          '<a id="top"></a>',
          '[ref]: docs/api.md',
        ].join('\n'),
        'docs/api.md':
          '# API\n\n## `int64` ids\n\n## Scopes (`plants:admin` included)\n\n[back](../README.md#plant-store)\n',
      },
      ['docs/logo.png', 'deploy/nginx.conf'],
    );
    assert.deepEqual(problems, []);
  });

  it('reports a missing file, an unknown anchor here or elsewhere, and links that leave the repository', () => {
    const problems = check(
      {
        'README.md': [
          '# Plant Store',
          'A [missing file](docs/nope.md), [an image](img/none.png), a [bad anchor](#nowhere),',
          'a [bad anchor elsewhere](docs/api.md#nowhere), [the contract](../shared/CONTRACT.md),',
          '[outside](../../etc/passwd), [absolute](/work/shared/CONTRACT.md), [a file URL](file:///etc/hosts).',
        ].join('\n'),
        'docs/api.md': '# API\n\n[up and out](../../shared/CONTRACT.md)\n',
      },
      [],
    );
    assert.deepEqual(problems, [
      'README.md:2: docs/nope.md: docs/nope.md is not a file of the repository',
      'README.md:2: img/none.png: img/none.png is not a file of the repository',
      'README.md:2: #nowhere: no heading of README.md has the anchor #nowhere',
      'README.md:3: docs/api.md#nowhere: no heading of docs/api.md has the anchor #nowhere',
      'README.md:3: ../shared/CONTRACT.md: links to ../shared, which is outside the repository (a broken link on a clone)',
      'README.md:4: ../../etc/passwd: leaves the repository',
      'README.md:4: /work/shared/CONTRACT.md: links to ../shared, which is outside the repository (a broken link on a clone)',
      'README.md:4: file:///etc/hosts: a file: link cannot be followed on a clone',
      'docs/api.md:3: ../../shared/CONTRACT.md: links to ../shared, which is outside the repository (a broken link on a clone)',
    ]);
  });

  it('ignores what GitHub does not render as a link: code blocks, code spans and HTML comments', () => {
    const problems = check({
      'README.md': '# Docs\n\n```md\n[broken](nope.md)\n```\n\nA `[span](nope.md)` and <!-- [hidden](nope.md) -->.\n',
    });
    assert.deepEqual(problems, []);
  });

  it('makes anchors as GitHub does: lower case, punctuation dropped, spaces to -, repeats numbered', () => {
    const anchors = markdownAnchors(
      [
        '# Plant Store',
        '## Compression, ETags and CORS',
        '## `DATABASE_URL`: the store',
        '## The command-line client (plants)',
        '## Notes',
        '## Notes',
        '## Notes',
        '```',
        '## not a heading',
        '```',
      ].join('\n'),
    );
    assert.deepEqual(
      [...anchors],
      [
        'plant-store',
        'compression-etags-and-cors',
        'database_url-the-store',
        'the-command-line-client-plants',
        'notes',
        'notes-1',
        'notes-2',
      ],
    );
  });
});
