import { readdirSync } from 'node:fs';
import { join, posix } from 'node:path';

// Just enough Markdown to check links the way GitHub renders them: fenced code, code spans and
// HTML comments hold no links; headings get GitHub's anchors (github-slugger's rules).

export interface MarkdownLink {
  readonly line: number;
  readonly target: string;
}

/** A line of the file with what cannot hold a link or a heading blanked: fenced code, comments. */
function proseLines(text: string): string[] {
  const lines = text.split(/\r?\n/);
  let fence: string | undefined;
  let comment = false;
  return lines.map((line) => {
    if (fence !== undefined) {
      const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
      if (close && close[1]![0] === fence[0] && close[1]!.length >= fence.length) fence = undefined;
      return '';
    }
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (open && !comment) {
      fence = open[1]!;
      return '';
    }
    let out = '';
    let rest = line;
    while (rest !== '') {
      if (comment) {
        const end = rest.indexOf('-->');
        if (end < 0) return out;
        comment = false;
        rest = rest.slice(end + 3);
      } else {
        const start = rest.indexOf('<!--');
        if (start < 0) return out + rest;
        out += rest.slice(0, start);
        comment = true;
        rest = rest.slice(start + 4);
      }
    }
    return out;
  });
}

/** Code spans (`…`, ``…``) removed: what is inside them is text, not Markdown. */
const withoutCodeSpans = (line: string): string => line.replace(/(`+)(?:(?!\1)[\s\S])*?\1/g, ' ');

/** The destination that starts at `text[at]`: `<…>`, or up to whitespace or an unbalanced `)`. */
function destination(text: string, at: number): string {
  if (text[at] === '<') {
    const end = text.indexOf('>', at);
    return end < 0 ? '' : text.slice(at + 1, end);
  }
  let depth = 0;
  let end = at;
  for (; end < text.length; end++) {
    const c = text[end]!;
    if (/\s/.test(c)) break;
    if (c === '(') depth += 1;
    if (c === ')') {
      if (depth === 0) break;
      depth -= 1;
    }
  }
  return text.slice(at, end);
}

/** Every link and image target of a Markdown text: inline, reference definitions, autolinks, HTML. */
export function markdownLinks(text: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  proseLines(text).forEach((raw, index) => {
    const line = withoutCodeSpans(raw);
    const add = (target: string): void => void (target !== '' && links.push({ line: index + 1, target }));
    for (let at = line.indexOf(']('); at >= 0; at = line.indexOf('](', at + 2)) {
      add(destination(line, at + 2 + (/^\s*/.exec(line.slice(at + 2))?.[0].length ?? 0)));
    }
    const definition = /^ {0,3}\[[^\]]+\]:\s*(\S+)/.exec(line);
    if (definition) add(definition[1]!.replace(/^<(.*)>$/, '$1'));
    for (const m of line.matchAll(/<((?:https?|mailto|file):[^\s<>]*)>/gi)) add(m[1]!);
    for (const m of line.matchAll(/\b(?:href|src)\s*=\s*("([^"]*)"|'([^']*)')/gi)) add(m[2] ?? m[3] ?? '');
  });
  return links;
}

/** A heading's text as GitHub renders it: links and images as their text, no code marks or emphasis. */
function renderedText(heading: string): string {
  return heading
    .replace(/!\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '')
    .replace(/\*+|~~/g, '');
}

/**
 * GitHub's anchors for a file's headings (github-slugger): lower case, everything but letters,
 * digits, marks, connector punctuation (`_`), `-` and spaces removed, spaces turned into `-`; a
 * repeated anchor gets `-1`, `-2`, …. HTML `id` and `name` attributes are anchors too.
 */
export function markdownAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const occurrences = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (heading) {
      const base = renderedText(heading[1] ?? '')
        .toLowerCase()
        .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
        .replace(/ /g, '-');
      let slug = base;
      while (anchors.has(slug)) {
        const count = (occurrences.get(base) ?? 0) + 1;
        occurrences.set(base, count);
        slug = `${base}-${count}`;
      }
      anchors.add(slug);
    }
    for (const m of line.matchAll(/\b(?:id|name)\s*=\s*"([^"]+)"/g)) anchors.add(m[1]!);
  }
  return anchors;
}

export interface Repository {
  /** Every Markdown file to check (repository-relative, `/`-separated) and its text. */
  readonly markdown: ReadonlyMap<string, string>;
  /** Whether a repository-relative path is a file or folder of the repository (a clone has it). */
  kind(path: string): 'file' | 'folder' | undefined;
  /** The text of a Markdown file that a link targets, when it is not among `markdown`. */
  read(path: string): string | undefined;
}

export interface LinkReport {
  /** `file:line: target: what is wrong`, one per broken link. */
  readonly problems: string[];
  /** Absolute links to other hosts (`file:line: url`): allowed to public standards and library docs only. */
  readonly external: string[];
  /** How many relative links (and anchors) were checked and found good. */
  readonly checked: number;
}

/** Checks every link of every Markdown file of a repository (see test/docs/links.test.ts). */
export function checkLinks(repo: Repository): LinkReport {
  const problems: string[] = [];
  const external: string[] = [];
  let checked = 0;
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (path: string): Set<string> | undefined => {
    if (!anchorsOf.has(path)) {
      const text = repo.markdown.get(path) ?? repo.read(path);
      if (text === undefined) return undefined;
      anchorsOf.set(path, markdownAnchors(text));
    }
    return anchorsOf.get(path);
  };

  for (const [file, text] of repo.markdown) {
    for (const { line, target } of markdownLinks(text)) {
      const where = `${file}:${line}: ${target}`;
      const problem = (what: string): void => void problems.push(`${where}: ${what}`);
      if (/(^|\/)\.\.\/shared(\/|$)/.test(target) || /(^|\/)shared\/CONTRACT\.md/i.test(target)) {
        problem('links to ../shared, which is outside the repository (a broken link on a clone)');
        continue;
      }
      const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(target)?.[1]?.toLowerCase();
      if (scheme === 'http' || scheme === 'https' || scheme === 'mailto') {
        external.push(`${file}:${line}: ${target}`);
        continue;
      }
      if (scheme !== undefined) {
        problem(`a ${scheme}: link cannot be followed on a clone`);
        continue;
      }
      if (target.startsWith('//')) {
        problem('a protocol-relative link: write https://');
        continue;
      }
      if (target.startsWith('/')) {
        problem('an absolute path: write a link relative to this file');
        continue;
      }
      const hashAt = target.indexOf('#');
      const pathPart = (hashAt < 0 ? target : target.slice(0, hashAt)).split('?', 1)[0]!;
      const fragment = hashAt < 0 ? undefined : target.slice(hashAt + 1);
      let decoded: string;
      try {
        decoded = decodeURIComponent(pathPart);
      } catch {
        problem('malformed percent-encoding');
        continue;
      }
      const resolved = decoded === '' ? file : posix.normalize(posix.join(posix.dirname(file), decoded));
      if (resolved === '..' || resolved.startsWith('../') || posix.isAbsolute(resolved)) {
        problem('leaves the repository');
        continue;
      }
      const path = resolved.replace(/\/$/, '') || '.';
      const kind = path === '.' ? 'folder' : repo.kind(path);
      if (kind === undefined) {
        problem(`${path} is not a file of the repository`);
        continue;
      }
      if (fragment !== undefined && fragment !== '' && kind === 'file' && path.toLowerCase().endsWith('.md')) {
        const found = anchors(path);
        if (found === undefined || !found.has(fragment)) {
          problem(`no heading of ${path} has the anchor #${fragment}`);
          continue;
        }
      }
      checked += 1;
    }
  }
  return { problems, external, checked };
}

/**
 * The code block after `<!-- <kind>: <mark> -->` in `doc` (docs/events.md marks its runnable
 * snippets so: `receiver: file receiver.mjs`, `feed: run`), for the tests that run them as printed.
 */
export function markedBlock(doc: string, kind: string, mark: string): string {
  const escaped = mark.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`<!-- ${kind}: ${escaped} -->\\n+\`\`\`[a-z]*\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
  if (m === null) throw new Error(`the document marks no block with <!-- ${kind}: ${mark} -->`);
  return m[1]!;
}

/** The environment of a user's shell: without npm's npm_* variables and tsx's NODE_OPTIONS, which `npm test` adds. */
export const userEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'));

/** The documents a user reads (paths from the repository's root): the READMEs and docs/*.md. */
export function userDocs(root: string): string[] {
  return [
    'README.md',
    'packages/client/README.md',
    ...readdirSync(join(root, 'docs'))
      .filter((name) => name.endsWith('.md'))
      .map((name) => `docs/${name}`),
  ];
}
