import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli, runCliProcess } from '../process.js';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const freshDb = (): NodeJS.ProcessEnv => ({ DATABASE_URL: `sqlite:${join(dir, `cli-${n++}.db`)}` });

test('token create --json prints one JSON object with id, token, subject, scopes, expiresAt and nothing else', async () => {
  const env = freshDb();
  const r = await runCli(
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write', '--json'],
    env,
  );
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trimEnd().split('\n');
  assert.equal(lines.length, 1);
  const issued = JSON.parse(lines[0]!) as Record<string, unknown>;
  assert.deepEqual(Object.keys(issued).sort(), ['expiresAt', 'id', 'scopes', 'subject', 'token']);
  assert.equal(issued.subject, 'alice');
  assert.deepEqual(issued.scopes, ['plants:read', 'plants:write']);
  assert.equal(issued.expiresAt, null);
  assert.match(issued.token as string, /^pst_[0-9A-Za-z]{50}$/);
  assert.ok((issued.token as string).startsWith(`pst_${issued.id as string}`));
});

test('token create --expires-in sets the expiry that far ahead', async () => {
  const before = Date.now();
  const r = await runCli(
    ['token', 'create', '--subject', 'bob', '--scopes', 'plants:read', '--expires-in', '90s', '--json'],
    freshDb(),
  );
  assert.equal(r.code, 0, r.stderr);
  const expiresAt = Date.parse((JSON.parse(r.stdout) as { expiresAt: string }).expiresAt);
  assert.ok(expiresAt >= before + 90_000 && expiresAt <= Date.now() + 90_000);
});

test('token create without --json prints only the secret on stdout and the details on stderr', async () => {
  const r = await runCli(['token', 'create', '--subject', 'carol', '--scopes', 'plants:admin'], freshDb());
  assert.equal(r.code, 0);
  assert.match(r.stdout, /^pst_[0-9A-Za-z]{50}\n$/);
  assert.match(r.stderr, /for carol \(plants:admin\), no expiry/);
  assert.ok(!r.stderr.includes(r.stdout.trim()));
});

test('token list shows ids, subjects, scopes, expiry and status, and never a secret', async () => {
  const env = freshDb();
  const a = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--json'], env);
  const issued = JSON.parse(a.stdout) as { id: string; token: string };
  const human = await runCli(['token', 'list'], env);
  assert.equal(human.code, 0);
  assert.match(human.stdout, /^ID\s+SUBJECT\s+SCOPES\s+CREATED\s+EXPIRES\s+STATUS\n/);
  assert.match(human.stdout, new RegExp(`${issued.id}\\s+alice\\s+plants:read\\s+\\S+\\s+never\\s+active`));
  const listed = await runCli(['token', 'list', '--json'], env);
  const rows = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
  assert.deepEqual(Object.keys(rows[0]!).sort(), [
    'createdAt',
    'expiresAt',
    'id',
    'revokedAt',
    'scopes',
    'status',
    'subject',
  ]);
  const secret = issued.token.slice(16);
  for (const output of [human.stdout, human.stderr, listed.stdout, listed.stderr]) {
    assert.ok(!output.includes(secret), 'no secret in token list output');
  }
});

test('token revoke marks the token revoked; an unknown id exits 1', async () => {
  const env = freshDb();
  const a = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--json'], env);
  const { id } = JSON.parse(a.stdout) as { id: string };
  const revoked = await runCli(['token', 'revoke', id], env);
  assert.equal(revoked.code, 0);
  assert.match(revoked.stderr, /Revoked token/);
  const rows = JSON.parse((await runCli(['token', 'list', '--json'], env)).stdout) as Array<{ status: string }>;
  assert.equal(rows[0]!.status, 'revoked');
  const unknown = await runCli(['token', 'revoke', 'nope'], env);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /No token with id nope/);
});

test('mistakes in a command exit 2 with a message on stderr', async () => {
  const env = freshDb();
  const cases: string[][] = [
    ['token', 'create', '--subject', 'alice'],
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:destroy'],
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--expires-in', 'soon'],
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--expires-in', '99999999d'],
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--expires-in', '3651d'],
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--bogus'],
    ['token', 'frobnicate'],
    ['token', 'revoke'],
    ['launch'],
  ];
  for (const args of cases) {
    const r = await runCli(args, env);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /^plant-store: /, args.join(' '));
    assert.equal(r.stdout, '', args.join(' '));
  }
});

test('a bad setting exits 2 naming the setting', async () => {
  const r = await runCli(['migrate'], { DATABASE_URL: 'mysql://nope' });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /DATABASE_URL/);
});

test('migrate applies the schema once and says so', async () => {
  const env = freshDb();
  const first = await runCli(['migrate'], env);
  assert.equal(first.code, 0);
  assert.equal(
    first.stderr,
    `plant-store: database ${env.DATABASE_URL!} (a new file: it did not exist)\nApplied migrations 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11.\n`,
  );
  const second = await runCli(['migrate'], env);
  assert.equal(second.code, 0);
  assert.equal(second.stderr, `plant-store: database ${env.DATABASE_URL!}\nThe database schema is up to date.\n`);
});

// Operations issue, 3: without DATABASE_URL a command used data/plant-store.db of its folder, silently.
test('every command that opens the database names it first on stderr, and stdout stays clean', async () => {
  const cwd = mkdtempSync(join(dir, 'default-'));
  const unset = { DATABASE_URL: undefined };
  const minted = await runCli(
    ['token', 'create', '--subject', 'alice', '--scopes', 'plants:read', '--json'],
    unset,
    cwd,
  );
  assert.equal(minted.code, 0, minted.stderr);
  assert.equal(
    minted.stderr.split('\n')[0],
    `plant-store: database sqlite:data/plant-store.db (${join(cwd, 'data/plant-store.db')}; a new file: it did not exist)`,
  );
  assert.deepEqual(Object.keys(JSON.parse(minted.stdout) as object).length, 5);
  const env = freshDb();
  assert.equal((await runCli(['migrate'], env)).code, 0);
  for (const args of [
    ['migrate'],
    ['token', 'list', '--json'],
    ['token', 'revoke', 'nope'],
    ['export'],
    ['webhooks', 'list'],
  ]) {
    const r = await runCli(args, env);
    assert.equal(r.stderr.split('\n')[0], `plant-store: database ${env.DATABASE_URL!}`, args.join(' '));
  }
  const listed = await runCli(['token', 'list', '--json'], env);
  assert.deepEqual(JSON.parse(listed.stdout), []);
});

test('the database line names a PostgreSQL database without its password', async () => {
  // Nothing listens on port 9: the line comes before the connection fails.
  const r = await runCli(['token', 'list'], {
    DATABASE_URL: 'postgres://app:s3cret-pw@127.0.0.1:9/plants?password=qp-s3cret',
  });
  assert.equal(r.code, 1);
  assert.equal(r.stderr.split('\n')[0], 'plant-store: database postgres://app@127.0.0.1:9/plants');
  assert.doesNotMatch(r.stderr, /s3cret/);
});

test('--help prints the usage and exits 0', async () => {
  const r = await runCli(['--help'], freshDb());
  assert.equal(r.code, 0);
  assert.match(r.stdout, /^Usage: plant-store <command>/);
  assert.match(r.stdout, /token create --subject <user> --scopes <s1,s2>/);
  assert.match(r.stdout, /^ {2}--version, -v +print the version/m);
});

test("--version and -v print package.json's version alone on stdout and exit 0", async () => {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  for (const flag of ['--version', '-v']) {
    const r = await runCli([flag], {});
    assert.deepEqual(r, { code: 0, stdout: `${version}\n`, stderr: '' }, flag);
  }
});

test('as a process (node bin/plant-store.js) a command says and exits what runCli sees in the tests: 0, 1 and 2', async () => {
  // The other tests run the command in their own process (runCli): here the same calls,
  // as processes, answer the same exit codes, stdout and stderr.
  const env = freshDb();
  assert.equal((await runCli(['migrate'], env)).code, 0); // the database exists before either run
  const cases: string[][] = [['--version'], ['token', 'list', '--json'], ['token', 'revoke', 'nope'], ['launch']];
  const codes: number[] = [];
  for (const args of cases) {
    const [here, process] = [await runCli(args, env), await runCliProcess(args, env)];
    assert.deepEqual(process, here, args.join(' '));
    codes.push(process.code);
  }
  assert.deepEqual(codes, [0, 0, 1, 2]);
  const setting = await runCliProcess(['migrate'], { DATABASE_URL: 'mysql://nope' });
  assert.equal(setting.code, 2);
  assert.match(setting.stderr, /^plant-store: DATABASE_URL /);
});
