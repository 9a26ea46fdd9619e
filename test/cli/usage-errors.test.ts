import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { usageFor } from '../../src/cli/usage.js';
import { runCli, runCliProcess } from '../process.js';

// docs/cli.md: a usage mistake prints what was wrong, then that command's usage, then the line
// that points at --help, on stderr, and exits 2. The values a command checks itself (a scope, a
// duration, an id, a page size) are usage mistakes as much as an unknown option, and are said
// before any database is opened: no "plant-store: database …" line, no file created.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'plant-store-usage-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const database = join(dir, 'never-opened.db');
const env: NodeJS.ProcessEnv = { DATABASE_URL: `sqlite:${database}` };

const MORE = 'plant-store --help describes every command, with examples.';
/** What the command prints on stderr for `message`, a mistake in `command` (as the usage names it). */
const expected = (message: string, command: string): string =>
  `plant-store: ${message}\n\nUsage:\n${usageFor(command)!}\n\n${MORE}\n`;

const CASES: Array<{ args: string[]; message: string; command: string }> = [
  {
    args: ['token', 'create', '--subject', 'alice', '--scopes', 'plants:bogus'],
    message:
      'scopes must be a comma-separated list of plants:read, plants:write, plants:admin, webhooks:read, webhooks:write; unknown: plants:bogus',
    command: 'token create',
  },
  {
    args: ['token', 'create', '--subject', '', '--scopes', 'plants:read'],
    message: 'the subject must be 1 to 200 characters without control characters',
    command: 'token create',
  },
  {
    args: ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--expires-in', '3651d'],
    message:
      '--expires-in takes a duration up to 3650d, such as 30d, 12h or 90s; leave it out for a token that never expires',
    command: 'token create',
  },
  {
    args: ['token', 'list', '--limit', '0'],
    message: '--limit takes a whole number, 1 or more: the most tokens to show',
    command: 'token list',
  },
  {
    args: ['webhooks', 'add', '--subject', 'alice', '--url', 'https://example.com/h', '--events', 'plant.eaten'],
    message: '--events takes one or more of plant.created,plant.deleted, comma-separated; unknown: plant.eaten',
    command: 'webhooks add',
  },
  {
    args: ['webhooks', 'rotate', 'wh_5Hc2vKQ9XyPz3mTb', '--overlap', '8d'],
    message: '--overlap takes a duration from 0 to 7d in whole seconds, such as 24h, 90m or 0',
    command: 'webhooks rotate',
  },
  {
    args: ['webhooks', 'deliveries', 'wh_5Hc2vKQ9XyPz3mTb', '--limit', '0'],
    message: '--limit takes a whole number from 1 to 1000: the newest deliveries to show',
    command: 'webhooks deliveries',
  },
  {
    args: ['webhooks', 'update', 'wh_5Hc2vKQ9XyPz3mTb', '--status', 'paused'],
    message: '--status takes active or disabled',
    command: 'webhooks update',
  },
  {
    args: ['plants', 'create', '--id', '1.5', '--name', 'Fern'],
    message: 'a plant id is an int64: a decimal integer from -9223372036854775808 to 9223372036854775807',
    command: 'plants create',
  },
  {
    args: ['plants', 'list', '--page-size', '0'],
    message: '--page-size takes a whole number from 1 to 1000: plants per request',
    command: 'plants list',
  },
  {
    args: ['import', join(dir, 'no-such.ndjson')],
    message: `cannot read ${join(dir, 'no-such.ndjson')}: there is no such file; give an NDJSON file, or - to read stdin`,
    command: 'import',
  },
];

test("a value a command refuses exits 2 and prints the message, that command's usage and the --help line", async () => {
  for (const { args, message, command } of CASES) {
    const r = await runCli(args, env);
    assert.deepEqual(r, { code: 2, stdout: '', stderr: expected(message, command) }, args.join(' '));
  }
  assert.ok(!existsSync(database), 'no usage mistake opened (or created) the database');
});

test("the usage printed is the command's own lines of --help, and the plants commands' connection lines", async () => {
  const tokenCreate = usageFor('token create')!;
  assert.match(
    tokenCreate,
    /^ {2}token create --subject <user> --scopes <s1,s2> \[--expires-in 30d\|12h\|90s\] \[--json\]\n/,
  );
  assert.doesNotMatch(tokenCreate, /token list|token revoke/);
  const help = await runCli(['--help'], env);
  for (const command of new Set(CASES.map((c) => c.command))) {
    const own = usageFor(command)!.split('\n  These take --url')[0]!;
    assert.ok(help.stdout.includes(own), `--help holds the usage printed after a mistake in ${command}`);
  }
  assert.match(usageFor('plants create')!, /\n {2}These take --url <url> \(or PLANT_STORE_URL/);
});

test('as a process, the printed example of docs/cli.md: token create with an unknown scope', async () => {
  const cliMd = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');
  const block = /<!--\s*usage-mistake\s*-->\s*\n```\n\$ plant-store (.+)\n([\s\S]*?)\n```/.exec(cliMd);
  assert.ok(block, 'docs/cli.md prints a usage mistake and what it answers, after <!-- usage-mistake -->');
  const args = block[1]!.split(' ');
  const r = await runCliProcess(args, env);
  assert.deepEqual(r, { code: 2, stdout: '', stderr: `${block[2]!}\n` });
  assert.ok(!existsSync(database), 'the database was not opened');
});
