import { PlantStoreClient, DEFAULT_RETRY_POLICY, LIMIT } from '@plant-store/client';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { BIN, type CliResult, type ServerProcess, runCli, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { ROOT, withoutPlantStore } from './checkout-support.js';

// The command line works as printed: negative ids as plain option values, --limit
// as the number of plants shown, errors that say what to do, quiet ends under `| head`, the
// usage's examples, and the usage's numbers.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-as-printed-'));
const serverEnv = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: 'off' };
let server: ServerProcess;

before(async () => {
  server = await startServer(serverEnv);
});
after(async () => {
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function token(subject: string): Promise<string> {
  return mintCliToken(serverEnv, subject);
}

const plants = (args: string[], secret: string): Promise<CliResult> =>
  runCli(['plants', ...args], { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: secret });

test('a negative id is a plain option value: --id -5, --id=-5 and a bare -5, to create and to delete', async () => {
  const secret = await token('negative');
  const steps: Array<[string[], string]> = [
    [['create', '--id', '-5', '--name', 'Nope'], 'Created plant -5: Nope.\n'],
    [['delete', '--id', '-5'], 'Deleted plant -5.\n'],
    [['create', '--id=-5', '--name', 'Nope', '--tag', '-'], 'Created plant -5: Nope (tag -).\n'],
    [['delete', '--id=-5'], 'Deleted plant -5.\n'],
    [['create', '--name', 'Low', '--id', '-9223372036854775808'], 'Created plant -9223372036854775808: Low.\n'],
    [['delete', '-9223372036854775808'], 'Deleted plant -9223372036854775808.\n'],
  ];
  for (const [args, stderr] of steps) {
    const r = await plants(args, secret);
    assert.deepEqual([r.code, r.stderr, r.stdout], [0, stderr, ''], args.join(' '));
  }
  // An option where a value belongs is a missing value, not a value: the likelier slip.
  const slip = await plants(['create', '--id', '--name', 'Nope'], secret);
  assert.equal(slip.code, 2);
  assert.match(slip.stderr, /^plant-store: --id needs a value\n/);
});

test('a usage mistake prints the message and that command usage, not the whole usage; <command> --help prints it', async () => {
  const secret = await token('usage');
  const r = await plants(['create', '--id', '1', '--name', 'x', '--bogus'], secret);
  assert.equal(r.code, 2);
  assert.equal(r.stdout, '');
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines[0], 'plant-store: plants create has no option --bogus');
  assert.ok(
    lines.some((l) => l.startsWith('  plants create --id <int64> --name <name>')),
    r.stderr,
  );
  assert.ok(!lines.some((l) => /^ {2}(plants list|token|serve) /.test(l)), 'no other command');
  assert.ok(lines.length < 15, `${lines.length} lines`);
  assert.match(lines.at(-1)!, /plant-store --help/);

  const help = await runCli(['plants', 'list', '--help'], {});
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /^ {2}plants list \[--tag T\] \[--limit N\] \[--page-size N\] \[--json\]\n/);
});

test('plants list --limit N shows at most N plants; --page-size sets only how many each request asks for', async () => {
  const secret = await token('limit');
  const client = new PlantStoreClient({ baseUrl: server.url, token: secret });
  for (let i = 1; i <= 7; i++) await client.create({ id: BigInt(7_000_000 + i), name: `p${i}`, tag: 'limited' });
  const names = (n: number): string => Array.from({ length: n }, (_, i) => `p${i + 1}\tlimited\n`).join('');
  const requests = (): string[] =>
    server
      .logs()
      .split('\n')
      .filter((l) => l.includes('"url":"/plants?') && l.includes('tag=limited'))
      .map((l) => (JSON.parse(l) as { url: string }).url);

  const cases: Array<[string[], number, Array<string | undefined>]> = [
    [['--limit', '1'], 1, ['1']],
    [['--limit', '3'], 3, ['3']],
    [['--limit', '100'], 7, ['100']],
    [['--page-size', '2'], 7, ['2', '2', '2', '2']],
    [['--limit', '5', '--page-size', '2'], 5, ['2', '2', '1']],
    [[], 7, [undefined]],
  ];
  for (const [options, shown, pages] of cases) {
    const seen = requests().length;
    const r = await plants(['list', '--tag', 'limited', ...options], secret);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, names(shown), options.join(' '));
    // The server logs a request as its answer goes out: the line may follow the answer by a moment.
    await eventually(
      async () => (requests().length >= seen + pages.length ? true : undefined),
      () =>
        `the server logged the ${pages.length} requests of ${options.join(' ')} (${requests().length - seen} so far)`,
    );
    const sent = requests()
      .slice(seen)
      .map((url) => new URL(url, 'http://x').searchParams.get('limit') ?? undefined);
    assert.deepEqual(sent, pages, `the requests of ${options.join(' ')}`);
  }
  const json = await plants(['list', '--tag', 'limited', '--limit', '2', '--json'], secret);
  assert.deepEqual(JSON.parse(json.stdout), [
    { name: 'p1', tag: 'limited' },
    { name: 'p2', tag: 'limited' },
  ]);
  for (const [args, message] of [
    [['--limit', '0'], /--limit takes a whole number, 1 or more/],
    [['--limit', 'all'], /--limit takes a whole number/],
    [['--page-size', '1001'], /--page-size takes a whole number from 1 to 1000/],
  ] as const) {
    const r = await plants(['list', ...args], secret);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, message);
  }
});

/** Runs the command, reads its first chunk of stdout and closes the pipe, as `| head -1` does. */
async function cutShort(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  const exited = once(child, 'exit');
  await Promise.race([once(child.stdout, 'data'), exited]);
  child.stdout.destroy();
  const [code] = (await exited) as [number | null];
  return { code, stderr };
}

test('export | head and plants list | head end quietly with exit 0, no EPIPE', { timeout: 60_000 }, async () => {
  // Far more than a pipe holds (64 KiB on Linux): the command is still writing when the reader goes.
  const name = 'n'.repeat(190);
  const file = join(dir, 'many.ndjson');
  writeFileSync(
    file,
    Array.from({ length: 2000 }, (_, i) => `{"id":${8_000_000 + i},"owner":"piped","name":"${name}${i}"}\n`).join(''),
  );
  assert.equal((await runCli(['import', file], serverEnv)).code, 0);
  const secret = await token('piped');
  const client = { PLANT_STORE_URL: server.url, PLANT_STORE_TOKEN: secret };
  for (const [args, env] of [
    [['export'], serverEnv],
    [['plants', 'list'], client],
    [['plants', 'list', '--json'], client],
  ] as const) {
    const r = await cutShort([...args], env);
    assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
    assert.doesNotMatch(r.stderr, /EPIPE|Error|plant-store: (?!database )/, args.join(' '));
  }
});

/** The example lines of the usage: after its "Examples" line, each indented by two spaces. */
function examplesOf(usage: string): string[] {
  const lines = usage.split('\n');
  const start = lines.findIndex((l) => l.startsWith('Examples'));
  assert.ok(start > 0, 'the usage has examples');
  const examples: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith('  ')) break;
    examples.push(line.slice(2));
  }
  return examples;
}

test(
  'every example of the usage runs as printed, in a shell, against a real server',
  { timeout: 120_000 },
  async (t) => {
    const help = await runCli(['--help'], {});
    assert.equal(help.code, 0);
    const examples = examplesOf(help.stdout);
    assert.ok(examples.length >= 8, examples.join('\n'));
    for (const form of ['--id -5', '--id=', 'delete --id -5', 'delete -5', 'list --limit 1']) {
      assert.ok(
        examples.some((e) => e.includes(form)),
        `an example shows ${form}`,
      );
    }

    // A fresh server, as a new user has it; `plant-store` on the PATH as the usage's line for a
    // checkout puts it there, run in the checkout's root, and nowhere else.
    const checkout = /^In a checkout, to run it as plant-store: (.+?) {3}\(/m.exec(help.stdout)?.[1];
    assert.ok(checkout, help.stdout);
    const at = mkdtempSync(join(dir, 'examples-'));
    const env = { DATABASE_URL: `sqlite:${join(at, 'plants.db')}`, RATE_LIMIT: 'off' };
    const fresh = await startServer(env);
    t.after(() => fresh.stop());
    const setup = `cd '${ROOT}'\n${checkout}\ncd '${at}'\n`;
    const script = setup + examples.map((line, i) => `${line}\necho "@@$?" ; echo "@@${i}" >&2\n`).join('');
    const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
      const shellEnv = {
        ...process.env,
        ...env,
        PATH: withoutPlantStore(),
        PLANT_STORE_URL: fresh.url,
        PLANT_STORE_TOKEN: undefined,
      };
      execFile('sh', ['-c', script], { cwd: at, env: shellEnv }, (_error, out, err) =>
        resolve({ stdout: out, stderr: err }),
      );
    });
    const outputs = stdout.split(/^@@(\d+)\n/m);
    const errors = stderr.split(/^@@\d+\n/m);
    const results = examples.map((line, i) => ({
      line,
      code: Number(outputs[2 * i + 1]),
      stdout: outputs[2 * i]!,
      stderr: errors[i]!,
    }));
    for (const r of results) {
      assert.equal(r.code, 0, `${r.line}\n${r.stderr}`);
      assert.doesNotMatch(r.stderr, /^(error \d|plant-store: (?!database ))/m, r.line);
    }
    const of = (text: string) => results.find((r) => r.line.includes(text))!;
    assert.equal(of('plants list --limit 1').stdout, 'Fern\tshade\n');
    assert.deepEqual(JSON.parse(of('--tag shade --json').stdout), [{ name: 'Fern', tag: 'shade' }]);
    assert.equal(of('--name Monstera --json').stdout, '{"id":9007199254740993,"name":"Monstera"}\n');
    assert.match(of('import plants.ndjson').stderr, /Imported 2 plants/);
    assert.match(of('token revoke').stderr, /Revoked token /);
    const tokens = JSON.parse((await runCli(['token', 'list', '--json'], env)).stdout) as Array<{ status: string }>;
    assert.deepEqual(
      tokens.map((tk) => tk.status),
      ['revoked'],
    );
  },
);

test('a body that is not JSON answers 415 naming Content-Type: application/json, on every route that reads one', async () => {
  const secret = await token('media');
  const auth = { authorization: `Bearer ${secret}` };
  const cases: Array<[string, string, Record<string, string>]> = [
    ['POST', '/plants', { 'content-type': 'text/plain' }],
    ['POST', '/plants', {}], // a body and no Content-Type at all
    ['POST', '/plants', { 'content-type': 'application/merge-patch+json' }],
    ['POST', '/plants', { 'content-type': 'application/jsonx' }],
    ['POST', '/plants', { 'content-type': 'application/json; charset=latin1' }],
    ['DELETE', '/plants/1', { 'content-type': 'text/plain' }],
  ];
  for (const [method, path, headers] of cases) {
    const body = new TextEncoder().encode('{"id":1,"name":"x"}'); // bytes: fetch adds no Content-Type
    const r = await fetch(new URL(path, server.url), { method, headers: { ...auth, ...headers }, body });
    assert.equal(r.status, 415, `${method} ${JSON.stringify(headers)}`);
    assert.deepEqual(await r.json(), {
      error: 415,
      message: 'the body must be JSON in UTF-8: send Content-Type: application/json',
    });
  }
  // A route that does not exist is still a 404, whatever the body.
  const nowhere = await fetch(new URL('/nowhere', server.url), {
    method: 'POST',
    headers: { ...auth, 'content-type': 'text/plain' },
    body: 'x',
  });
  assert.equal(nowhere.status, 404);
});

test('the usage says the numbers the code uses: the revocation delay, the page sizes, the retries', async () => {
  const help = (await runCli(['--help'], {})).stdout.replace(/\n {32}/g, ' ');
  const seconds = loadConfig({}).tokenCacheMs / 1000;
  assert.match(help, new RegExp(`refuse it within ${seconds} seconds`));
  assert.match(help, new RegExp(`per request \\(${LIMIT.min}-${LIMIT.max}, default ${LIMIT.default}\\)`));
  assert.match(help, new RegExp(`retried ${DEFAULT_RETRY_POLICY.retries} times`));
  assert.match(help, /\(408, 429, 502-504\)/);

  const minted = await runCli(
    ['token', 'create', '--subject', 'revoked', '--scopes', 'plants:read', '--json'],
    serverEnv,
  );
  const { id } = JSON.parse(minted.stdout) as { id: string };
  const revoked = await runCli(['token', 'revoke', id], serverEnv);
  assert.equal(revoked.code, 0);
  assert.match(revoked.stderr, new RegExp(`Running servers refuse it within ${seconds} seconds\\.`));
});
