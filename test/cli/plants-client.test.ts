import { PlantStoreClient } from '@plant-store/client';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { type CliResult, type ServerProcess, runCli, mintCliToken, startServer } from '../process.js';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-plants-cli-'));
const serverEnv = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: 'off' };
let server: ServerProcess;
const tokens: string[] = [];
/** Every output of every run, searched for tokens at the end. */
const outputs: string[] = [];

before(async () => {
  server = await startServer(serverEnv);
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function token(subject: string, scopes = 'plants:read,plants:write'): Promise<string> {
  const issued = await mintCliToken(serverEnv, subject, scopes);
  tokens.push(issued);
  return issued;
}

/** `plant-store plants …` against the test server, the token in PLANT_STORE_TOKEN unless given otherwise. */
async function plants(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const r = await runCli(['plants', ...args], { PLANT_STORE_URL: server.url, ...env });
  outputs.push(r.stdout, r.stderr);
  return r;
}

test('plants create prints nothing on stdout; --json prints the id exactly with the plant; exit 0', async () => {
  const env = { PLANT_STORE_TOKEN: await token('creator') };
  const human = await plants(['create', '--id', '9007199254740993', '--name', 'Monstera', '--tag', 'tropical'], env);
  assert.equal(human.code, 0, human.stderr);
  assert.equal(human.stdout, '');
  assert.match(human.stderr, /^Created plant 9007199254740993: Monstera \(tag tropical\)\.\n$/);

  const json = await plants(['create', '--id=-9223372036854775808', '--name', 'Lowest', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  assert.equal(json.stdout, '{"id":-9223372036854775808,"name":"Lowest"}\n');

  const again = await plants(['create', '--id', '9007199254740993', '--name', 'Monstera', '--tag', 'tropical'], env);
  assert.equal(again.code, 0, 'the same plant again is a safe retry');
});

test('plants list prints every page: name<TAB>tag lines when piped, one JSON array with --json', async () => {
  const secret = await token('lister');
  const client = new PlantStoreClient({ baseUrl: server.url, token: secret });
  for (let i = 0; i < 25; i++) {
    await client.create({
      id: 9007199254740000n + BigInt(i),
      name: `plant ${i}`,
      ...(i % 5 === 0 ? { tag: 'five' } : {}),
    });
  }
  const env = { PLANT_STORE_TOKEN: secret };
  const expected = Array.from({ length: 25 }, (_, i) =>
    i % 5 === 0 ? { name: `plant ${i}`, tag: 'five' } : { name: `plant ${i}` },
  );

  // --page-size: how many plants each request asks for; every page is still shown.
  const piped = await plants(['list', '--page-size', '10'], env);
  assert.equal(piped.code, 0, piped.stderr);
  assert.equal(piped.stdout, expected.map((p) => `${p.name}\t${p.tag ?? ''}\n`).join(''));

  const json = await plants(['list', '--page-size', '7', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.stdout), expected);
  assert.equal(json.stdout.split('\n').length, 25 + 3, 'a plant a line, between [ and ]');

  const tagged = await plants(['list', '--tag', 'five', '--page-size', '2', '--json'], env);
  assert.deepEqual(
    JSON.parse(tagged.stdout),
    expected.filter((p) => p.tag === 'five'),
  );
  const none = await plants(['list', '--tag', 'nothing', '--json'], env);
  assert.equal(none.stdout, '[]\n');
});

test('plants delete <id> exits 0, and 1 with "error 404: …" on stderr when there is no such plant', async () => {
  const env = { PLANT_STORE_TOKEN: await token('deleter') };
  assert.equal((await plants(['create', '--id=-5', '--name', 'Fern'], env)).code, 0);
  const deleted = await plants(['delete', '--', '-5'], env);
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.match(deleted.stderr, /^Deleted plant -5\.\n$/);
  const again = await plants(['delete', '--', '-5'], env);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /^error 404: .+\n$/);
  assert.equal(again.stdout, '');
});

test('refusals exit 1 with "error <status>: <message>": 401, 403, 409, 400', async () => {
  const writer = { PLANT_STORE_TOKEN: await token('refused') };
  const cases: Array<[number, string[], NodeJS.ProcessEnv]> = [
    [401, ['list'], { PLANT_STORE_TOKEN: 'pst_000000000000000000000000000000000000000000000000000' }],
    [403, ['create', '--id', '1', '--name', 'x'], { PLANT_STORE_TOKEN: await token('reader', 'plants:read') }],
    [409, ['create', '--id', '9007199254740993', '--name', 'Someone else'], writer],
    [400, ['create', '--id', '2', '--name', ''], writer],
  ];
  for (const [status, args, env] of cases) {
    const r = await plants(args, env);
    assert.equal(r.code, 1, `${status}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`^error ${status}: \\S.*\\n$`));
    assert.equal(r.stdout, '');
  }
});

test('usage errors exit 2: no token, a bad id, limit, page size or URL, a missing option or value, an unknown subcommand', async () => {
  const env = { PLANT_STORE_TOKEN: await token('usage') };
  const cases: Array<[string[], NodeJS.ProcessEnv, RegExp]> = [
    [['list'], { PLANT_STORE_TOKEN: '' }, /need a token/],
    [['create', '--id', '1.5', '--name', 'x'], env, /int64/],
    [['create', '--id', '9223372036854775808', '--name', 'x'], env, /int64/],
    [['delete', 'abc'], env, /int64/],
    [['delete'], env, /one plant id/],
    [['list', '--limit', '0'], env, /--limit/],
    [['list', '--limit', 'ten'], env, /--limit/],
    [['list', '--page-size', '0'], env, /--page-size/],
    [['list', '--page-size', '1001'], env, /--page-size/],
    [['list', '--url', 'not a url'], env, /not a URL/],
    [['list', '--url', 'ftp://127.0.0.1/'], env, /http/],
    [['list', '--token', 'two words'], env, /bearer token/],
    [['create', '--name', 'x'], env, /--id/],
    [['create', '--name', 'x', '--id'], env, /--id needs a value/],
    [['delete', '--id', '1', '2'], env, /one plant id/],
    [['list', '--bogus'], env, /bogus/],
    [['rename'], env, /unknown plants command/],
  ];
  for (const [args, given, message] of cases) {
    const r = await plants(args, given);
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, message);
    assert.equal(r.stdout, '');
  }
});

test('a server that cannot be reached exits 3, after the retries', async () => {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  const r = await plants(['list', '--url', `http://127.0.0.1:${port}`], { PLANT_STORE_TOKEN: await token('far') });
  assert.equal(r.code, 3, r.stderr);
  assert.match(r.stderr, /cannot reach the server: GET http:\/\/127\.0\.0\.1:\d+\/plants: .*ECONNREFUSED/);
  assert.equal((r.stderr.match(/retrying in \d+ ms/g) ?? []).length, 3);
});

test('--url and --token win over PLANT_STORE_URL and PLANT_STORE_TOKEN', async () => {
  const mine = await token('flags');
  const r = await runCli(
    ['plants', 'create', '--url', server.url, '--token', mine, '--id', '12', '--name', 'Flagged'],
    {
      PLANT_STORE_URL: 'http://127.0.0.1:9/',
      PLANT_STORE_TOKEN: 'pst_000000000000000000000000000000000000000000000000000',
    },
  );
  outputs.push(r.stdout, r.stderr);
  assert.equal(r.code, 0, r.stderr);
  const listed = await plants(['list', '--json'], { PLANT_STORE_TOKEN: mine });
  assert.deepEqual(JSON.parse(listed.stdout), [{ name: 'Flagged' }]);
});

test('no output of any plants command shows a token', () => {
  assert.ok(tokens.length > 5 && outputs.length > 20);
  for (const secret of tokens) {
    for (const output of outputs) assert.ok(!output.includes(secret.slice(16)), 'a token secret was printed');
  }
  assert.ok(!outputs.some((o) => o.includes('two words')), 'not even a malformed one');
});
