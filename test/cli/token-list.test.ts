import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { hashToken, mintToken } from '../../src/auth/token.js';
import { LIST_BATCH, TokenService } from '../../src/auth/token.service.js';
import { table } from '../../src/cli/output.js';
import { openPostgres } from '../../src/store/postgres/store.js';
import { openSqlite } from '../../src/store/sqlite/store.js';
import type { Store, TokenRecord } from '../../src/store/store.js';
import { type CliResult, runCli } from '../process.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { underTest } from '../support/engines.js';

// `token list` in pages (--limit, --after, --subject), read and printed LIST_BATCH
// tokens at a time on both engines; without options it prints what it printed before.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-token-list-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

interface TestDatabase {
  readonly env: NodeJS.ProcessEnv;
  open(): Store;
  /** Writes the rows in one statement, straight into api_tokens (thousands of creates would take seconds). */
  insert(tokens: readonly TokenRecord[]): Promise<void>;
  drop(): Promise<void>;
}

const COLUMNS = 'id, secret_hash, subject, scopes, created_at, expires_at, revoked_at';
const values = (t: TokenRecord): unknown[] => [
  t.id,
  t.secretHash,
  t.subject,
  t.scopes.join(' '),
  t.createdAt,
  t.expiresAt,
  t.revokedAt,
];

const engines: Array<[string, () => Promise<TestDatabase>]> = [
  [
    'SQLite',
    () => {
      const path = join(dir, `tokens-${n++}.db`);
      return Promise.resolve({
        env: { DATABASE_URL: `sqlite:${path}` },
        open: () => openSqlite(path),
        insert: (tokens) => {
          const db = new Database(path);
          try {
            const insert = db.prepare(`INSERT INTO api_tokens (${COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)`);
            db.transaction(() => tokens.forEach((t) => insert.run(...values(t))))();
          } finally {
            db.close();
          }
          return Promise.resolve();
        },
        drop: async () => {},
      });
    },
  ],
  [
    'PostgreSQL',
    async () => {
      const scratch = await scratchSchema();
      return {
        env: { DATABASE_URL: scratch.url },
        open: () => openPostgres(scratch.url, { poolSize: 2 }),
        insert: async (tokens) => {
          const client = new pg.Client({ connectionString: scratch.url });
          await client.connect();
          try {
            const rows = tokens.map((_, i) => `(${[1, 2, 3, 4, 5, 6, 7].map((c) => `$${i * 7 + c}`).join(', ')})`);
            await client.query(`INSERT INTO api_tokens (${COLUMNS}) VALUES ${rows.join(', ')}`, tokens.flatMap(values));
          } finally {
            await client.end();
          }
        },
        drop: () => scratch.drop(),
      };
    },
  ],
];

interface Listed {
  id: string;
  subject: string;
  scopes: string[];
  createdAt: string;
  expiresAt: string | null;
  revokedAt: string | null;
  status: string;
}

/**
 * `count` tokens: a few issued through the service (their secrets are answered), the rest written
 * straight into the table, three to a millisecond (the id orders those), subjects user0…user6 but
 * one longer subject past the first batch.
 */
async function issue(database: TestDatabase, count: number): Promise<string[]> {
  const store = database.open();
  const secrets: string[] = [];
  try {
    await store.migrate();
    const service = new TokenService(store);
    for (let i = 0; i < Math.min(count, 3); i++) {
      secrets.push((await service.create({ subject: `user${i % 7}`, scopes: ['plants:read'] })).token);
    }
  } finally {
    await store.close();
  }
  const start = Date.now() + 60_000; // after the issued ones, whichever clock stamped them
  const rows = Array.from({ length: count - secrets.length }, (_, k): TokenRecord => {
    const i = k + secrets.length;
    return {
      id: mintToken().id,
      secretHash: hashToken(mintToken().token),
      subject: i === LIST_BATCH + 200 ? 'a-subject-wider-than-the-others' : `user${i % 7}`,
      scopes: i % 3 ? ['plants:read'] : ['plants:read', 'plants:write'],
      createdAt: start + Math.floor(k / 3),
      expiresAt: i % 2 ? start + 86_400_000 : null,
      revokedAt: null,
    };
  });
  if (rows.length > 0) await database.insert(rows);
  return secrets;
}

/** The JSON listing, checked to be one JSON array on stdout and nothing more. */
function parsed(r: CliResult): Listed[] {
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.endsWith(']\n') && r.stdout.indexOf('\n') === r.stdout.length - 1, 'one line of JSON');
  return JSON.parse(r.stdout) as Listed[];
}

/** No secret in any output: no whole token, and no run of letters and digits as long as a secret's half. */
function assertNoSecret(secrets: readonly string[], ...outputs: string[]): void {
  for (const output of outputs) {
    assert.ok(!output.includes('pst_'), 'no whole token');
    assert.doesNotMatch(output, /[0-9A-Za-z]{16}/, 'nothing as long as a secret');
    for (const secret of secrets) assert.ok(!output.includes(secret.slice(16, 48)));
  }
}

const hint = /^More tokens follow: .*token list --limit (\d+) --after ([0-9A-Za-z]{12})( --subject \S+)?( --json)?$/m;

for (const [engine, create] of underTest(engines)) {
  test(`${engine}: token list without options prints every token, oldest first, as one table or one JSON array`, async (t) => {
    const database = await create();
    t.after(() => database.drop());
    const count = LIST_BATCH * 2 + 500; // three batches from the store
    const secrets = await issue(database, count);

    const json = await runCli(['token', 'list', '--json'], database.env);
    const all = parsed(json);
    assert.equal(all.length, count);
    assert.deepEqual(Object.keys(all[0]!), [
      'id',
      'subject',
      'scopes',
      'createdAt',
      'expiresAt',
      'revokedAt',
      'status',
    ]);
    for (const [i, token] of all.slice(1).entries()) {
      const before = all[i]!;
      assert.ok(
        before.createdAt < token.createdAt || (before.createdAt === token.createdAt && before.id < token.id),
        `${before.id} (${before.createdAt}) is listed before ${token.id} (${token.createdAt})`,
      );
    }
    assert.equal(new Set(all.map((token) => token.id)).size, count);
    assert.deepEqual(new Set(all.map((token) => token.status)), new Set(['active']));

    const human = await runCli(['token', 'list'], database.env);
    assert.equal(human.code, 0, human.stderr);
    const lines = human.stdout.trimEnd().split('\n');
    assert.equal(lines.length, count + 1);
    assert.match(lines[0]!, /^ID\s+SUBJECT\s+SCOPES\s+CREATED\s+EXPIRES\s+STATUS$/);
    const rows = all.map((token) => [
      token.id,
      token.subject,
      token.scopes.join(','),
      token.createdAt,
      token.expiresAt ?? 'never',
      token.status,
    ]);
    // The first batch is aligned exactly as the table of every token was before; later rows keep
    // those columns, wider where a later subject needs it.
    const header = ['ID', 'SUBJECT', 'SCOPES', 'CREATED', 'EXPIRES', 'STATUS'];
    assert.equal(lines.slice(0, LIST_BATCH + 1).join('\n'), table([header, ...rows.slice(0, LIST_BATCH)]));
    assert.deepEqual(
      lines.slice(1).map((line) => line.split(/ +/)),
      rows,
    );
    assert.doesNotMatch(human.stderr + json.stderr, /More tokens follow/);
    assertNoSecret(secrets, human.stdout, human.stderr, json.stdout, json.stderr);
  });

  test(`${engine}: token list --limit and --after walk the list in pages; stderr names the next page until the last`, async (t) => {
    const database = await create();
    t.after(() => database.drop());
    const secrets = await issue(database, 25);
    const all = parsed(await runCli(['token', 'list', '--json'], database.env));

    const pages: Listed[][] = [];
    let args = ['token', 'list', '--limit', '10', '--json'];
    for (;;) {
      const r = await runCli(args, database.env);
      const page = parsed(r);
      pages.push(page);
      assertNoSecret(secrets, r.stdout, r.stderr);
      const next = hint.exec(r.stderr);
      if (next === null) break;
      assert.equal(next[1], '10');
      assert.equal(next[2], page.at(-1)!.id, 'the next page starts after the last id printed');
      assert.equal(next[4], ' --json');
      args = ['token', 'list', '--limit', '10', '--after', next[2], '--json'];
    }
    assert.deepEqual(
      pages.map((page) => page.length),
      [10, 10, 5],
    );
    assert.deepEqual(pages.flat(), all);

    // A page that ends exactly at the last token names no next page; after the last, an empty one.
    const exact = await runCli(['token', 'list', '--limit', '5', '--after', all[19]!.id, '--json'], database.env);
    assert.deepEqual(parsed(exact), all.slice(20));
    assert.doesNotMatch(exact.stderr, /More tokens follow/);
    assert.deepEqual(parsed(await runCli(['token', 'list', '--after', all[24]!.id, '--json'], database.env)), []);
    const none = await runCli(['token', 'list', '--after', all[24]!.id], database.env);
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, new RegExp(`No tokens after ${all[24]!.id}\\.`));

    // The table pages the same way, each with its header.
    const table3 = await runCli(['token', 'list', '--limit', '3', '--after', all[4]!.id], database.env);
    assert.equal(table3.code, 0, table3.stderr);
    const lines = table3.stdout.trimEnd().split('\n');
    assert.match(lines[0]!, /^ID\s+SUBJECT/);
    assert.deepEqual(
      lines.slice(1).map((line) => line.split(' ')[0]),
      all.slice(5, 8).map((token) => token.id),
    );
    assert.equal(hint.exec(table3.stderr)?.[2], all[7]!.id);
    assert.equal(hint.exec(table3.stderr)?.[4], undefined);
  });

  test(`${engine}: token list --subject lists that subject's tokens only, in pages too`, async (t) => {
    const database = await create();
    t.after(() => database.drop());
    await issue(database, 30);
    const all = parsed(await runCli(['token', 'list', '--json'], database.env));
    const user3 = all.filter((token) => token.subject === 'user3');
    assert.equal(user3.length, 4);
    assert.deepEqual(parsed(await runCli(['token', 'list', '--subject', 'user3', '--json'], database.env)), user3);
    const first = await runCli(['token', 'list', '--subject', 'user3', '--limit', '3', '--json'], database.env);
    assert.deepEqual(parsed(first), user3.slice(0, 3));
    const next = hint.exec(first.stderr);
    assert.equal(next?.[3], ' --subject user3');
    const rest = await runCli(['token', 'list', '--subject', 'user3', '--after', next[2]!, '--json'], database.env);
    assert.deepEqual(parsed(rest), user3.slice(3));
    const nobody = await runCli(['token', 'list', '--subject', 'nobody'], database.env);
    assert.equal(nobody.code, 0);
    assert.equal(nobody.stdout, '');
    assert.match(nobody.stderr, /No tokens of nobody\./);
  });

  test(`${engine}: token list refuses a bad --limit or --after with exit 2 and prints nothing on stdout`, async (t) => {
    const database = await create();
    t.after(() => database.drop());
    const [secret] = await issue(database, 1);
    const cases: Array<[string[], RegExp]> = [
      [['--limit', '0'], /--limit takes a whole number, 1 or more/],
      [['--limit', 'ten'], /--limit takes a whole number, 1 or more/],
      [['--limit', '-5'], /--limit takes a whole number, 1 or more/],
      [['--after', 'nope'], /--after takes a token's id \(12 letters and digits/],
      [['--after', secret!], /--after takes a token's id .*, not the whole token/],
      [['--after', 'AAAAAAAAAAAA'], /^plant-store: --after: no token has the id AAAAAAAAAAAA/m],
      [['--after'], /--after needs a value/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['token', 'list', ...args], database.env);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message, args.join(' '));
      assert.equal(r.stdout, '', args.join(' '));
      assert.ok(!r.stderr.includes(secret!.slice(16)), 'the secret is not echoed');
    }
    const usage = await runCli(['token', 'list', '--limit', '0'], database.env);
    assert.match(
      usage.stderr,
      /Usage:\n {2}token list \[--subject <user>\] \[--limit N\] \[--after <token-id>\] \[--json\]/,
    );
  });
}
