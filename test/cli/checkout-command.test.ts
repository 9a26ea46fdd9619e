import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { CHECKOUT_PATH, EXAMPLES } from '../../src/cli/usage.js';
import { runCli } from '../process.js';
import { ROOT, bash, withoutPlantStore } from './checkout-support.js';

// Every command as printed works in a checkout, and fails loudly instead of giving an
// empty value. A bare `plant-store` was "command not found" there (the docs said so in a footnote);
// `export PLANT_STORE_TOKEN="$(plant-store token create …)"` exited 0 with an empty token when the
// command failed; the paging hint of `webhooks deliveries` printed a bare `plant-store` whatever
// had started it. Each test runs the printed lines with bash, on a PATH that has no plant-store.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-checkout-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const cliMd = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const cleanEnv = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: withoutPlantStore(),
  ...extra,
});
/** A database no command can open: its folder would be a file. */
const brokenDatabase = (): string => {
  const file = join(dir, `not-a-folder-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, '');
  return `sqlite:${join(file, 'plants.db')}`;
};

/** The lines of docs/cli.md's shell blocks. */
const shellLines = (markdown: string): string[] =>
  [...markdown.matchAll(/```(?:sh|bash|shell)\n([\s\S]*?)\n```/g)].flatMap((m) => m[1]!.split('\n'));

test("the line docs/cli.md and the usage print for a checkout makes plant-store this checkout's command", async () => {
  const printed = /<!--\s*checkout-path\s*-->\s*\n```sh\n(.+)\n```/.exec(cliMd)?.[1];
  assert.equal(printed, CHECKOUT_PATH);
  assert.ok(readme.includes(CHECKOUT_PATH), 'the README prints it too');
  const help = await runCli(['--help'], {});
  assert.ok(help.stdout.split('\n')[1]!.includes(`: ${CHECKOUT_PATH} `), help.stdout);

  const elsewhere = mkdtempSync(join(dir, 'elsewhere-'));
  const without = await bash(`cd '${elsewhere}'\nplant-store --version`, ROOT, cleanEnv());
  assert.equal(without.code, 127, 'without the line, a checkout has no plant-store');
  const withIt = await bash(
    `${printed}\ncd '${elsewhere}'\ncommand -v plant-store\nplant-store --version`,
    ROOT,
    cleanEnv(),
  );
  assert.deepEqual([withIt.code, withIt.stdout, withIt.stderr], [0, `${ROOT}/bin/plant-store\n1.0.0\n`, '']);
});

test('no printed line exports the output of a command: export hides its failure', async () => {
  const masking = /\bexport\s+\w+=["']?\$\(/;
  const help = (await runCli(['--help'], {})).stdout;
  for (const [where, lines] of [
    ['docs/cli.md', shellLines(cliMd)],
    ['README.md', shellLines(readme)],
    ['plant-store --help', help.split('\n')],
  ] as const) {
    const found = lines.filter((line) => masking.test(line));
    assert.deepEqual(found, [], where);
  }
});

test("docs/cli.md's token lines stop a set -e script when token create fails, instead of going on with an empty token", async () => {
  const lines = shellLines(cliMd);
  const minting = lines.flatMap((line, i) => {
    const name = /^(\w+)=\$\(plant-store token create /.exec(line)?.[1];
    if (name === undefined) return [];
    const exported = lines[i + 1] === `export ${name}` ? [lines[i + 1]!] : [];
    return [{ name, lines: [line, ...exported] }];
  });
  assert.ok(minting.length >= 3, `the token lines of docs/cli.md: ${JSON.stringify(minting)}`);
  const run = (name: string, printed: string[], env: NodeJS.ProcessEnv) =>
    bash(
      ['set -euo pipefail', CHECKOUT_PATH, ...printed, `echo "went on with [$${name}]"`].join('\n'),
      ROOT,
      cleanEnv(env),
    );

  for (const { name, lines: printed } of minting) {
    const broken = await run(name, printed, { DATABASE_URL: brokenDatabase() });
    assert.equal(broken.code, 1, `${printed.join('\n')}\n${broken.stderr}`);
    assert.equal(broken.stdout, '');
    assert.match(broken.stderr, /^plant-store: cannot open the SQLite database .* is a file, not a folder/m);

    const typo = printed.map((line) => line.replace('token create', 'token craete'));
    const mistyped = await run(name, typo, { DATABASE_URL: `sqlite:${join(dir, 'typo.db')}` });
    assert.equal(mistyped.code, 2, mistyped.stderr);
    assert.equal(mistyped.stdout, '');
    assert.match(mistyped.stderr, /^plant-store: unknown token command "craete"/m);
  }

  // What the docs printed before: the same failure, and the script went on with an empty token.
  const masked = await run(
    'PLANT_STORE_TOKEN',
    ['export PLANT_STORE_TOKEN="$(plant-store token create --subject alice --scopes plants:read)"'],
    { DATABASE_URL: brokenDatabase() },
  );
  assert.deepEqual([masked.code, masked.stdout], [0, 'went on with []\n']);
});

test('pasted without set -e, every line after a failed token create fails too, each saying why', async () => {
  assert.deepEqual(EXAMPLES.slice(0, 2), [
    'PLANT_STORE_TOKEN=$(plant-store token create --subject alice --scopes plants:read,plants:write)',
    'export PLANT_STORE_TOKEN',
  ]);
  const at = mkdtempSync(join(dir, 'pasted-'));
  const script = [
    `cd '${ROOT}'`,
    CHECKOUT_PATH,
    `cd '${at}'`,
    ...EXAMPLES.flatMap((line, i) => [line, `echo "@@${i} $?"`, `echo "@@${i}" >&2`]),
  ].join('\n');
  const run = await bash(
    script,
    at,
    cleanEnv({ DATABASE_URL: brokenDatabase(), PLANT_STORE_URL: 'http://127.0.0.1:9' }),
  );
  const codes = [...run.stdout.matchAll(/^@@(\d+) (\d+)$/gm)].map((m) => Number(m[2]));
  const said = run.stderr.split(/^@@\d+\n/m);
  assert.equal(codes.length, EXAMPLES.length, run.stdout);
  EXAMPLES.forEach((line, i) => {
    if (line === 'export PLANT_STORE_TOKEN') return;
    assert.ok(codes[i]! > 0, `${line} exited ${codes[i]}`);
    const reason = line.includes(' plants ')
      ? /^plant-store: plants commands need a token: set PLANT_STORE_TOKEN/m
      : /^plant-store: (cannot open the SQLite database|token revoke takes)/m;
    assert.match(said[i]!, reason, line);
  });
});

test('the paging hint of webhooks deliveries is a command that runs as printed, however plant-store was started', async () => {
  const env = { DATABASE_URL: `sqlite:${join(dir, 'hooks.db')}`, WEBHOOK_ALLOW_PRIVATE: '1' };
  const added = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', 'http://127.0.0.1:9/x', '--json'], env);
  const { id } = JSON.parse(added.stdout) as { id: string };
  const file = join(dir, 'five.ndjson');
  writeFileSync(file, [1, 2, 3, 4, 5].map((n) => `{"id":${n},"owner":"alice","name":"p${n}"}\n`).join(''));
  assert.equal((await runCli(['import', file], env)).code, 0);
  const whole = (JSON.parse((await runCli(['webhooks', 'deliveries', id, '--json'], env)).stdout) as { id: string }[])
    .map((d) => d.id)
    .join(',');

  /** Runs `first` in bash, then each hint it prints as printed, until the last page: the ids seen. */
  async function follow(first: string, cwd: string, shellEnv: NodeJS.ProcessEnv, prefix: string): Promise<string> {
    const seen: string[] = [];
    let command: string | undefined = `${first} webhooks deliveries ${id} --limit 2 --json`;
    for (let page = 0; command !== undefined && page < 5; page++) {
      const r = await bash(command, cwd, shellEnv);
      assert.equal(r.code, 0, `${command}\n${r.stderr}`);
      seen.push(...(JSON.parse(r.stdout) as { id: string }[]).map((d) => d.id));
      command = /^Older deliveries follow: (.+)$/m.exec(r.stderr)?.[1];
      if (command !== undefined) assert.ok(command.startsWith(`${prefix} webhooks deliveries `), command);
    }
    return seen.join(',');
  }

  const elsewhere = mkdtempSync(join(dir, 'elsewhere-'));
  const bare = cleanEnv(env);
  // node bin/plant-store.js in the checkout, node <its path> from elsewhere, and the PATH's plant-store.
  assert.equal(await follow('node bin/plant-store.js', ROOT, bare, 'node bin/plant-store.js'), whole);
  const program = join(ROOT, 'bin/plant-store.js');
  assert.equal(await follow(`node ${program}`, elsewhere, bare, `node ${program}`), whole);
  const onPath = cleanEnv({ ...env, PATH: `${ROOT}/bin:${withoutPlantStore()}` });
  assert.equal(await follow('plant-store', elsewhere, onPath, 'plant-store'), whole);

  // Another plant-store first on the PATH: the bare name would run that one, so the hint does not use it.
  mkdirSync(join(elsewhere, 'other'));
  writeFileSync(join(elsewhere, 'other', 'plant-store'), '#!/bin/sh\nexit 9\n');
  chmodSync(join(elsewhere, 'other', 'plant-store'), 0o755);
  const shadowed = cleanEnv({ ...env, PATH: `${elsewhere}/other:${ROOT}/bin:${withoutPlantStore()}` });
  assert.equal(await follow(`${ROOT}/bin/plant-store`, elsewhere, shadowed, `node ${program}`), whole);

  // Under npx (npm_command=exec), the one way the user's shell has to run it again.
  const npx = await runCli(['webhooks', 'deliveries', id, '--limit', '2'], { ...env, npm_command: 'exec' });
  assert.match(
    npx.stderr,
    new RegExp(`^Older deliveries follow: npx plant-store webhooks deliveries ${id} --limit 2 --before \\d+$`, 'm'),
  );
});
