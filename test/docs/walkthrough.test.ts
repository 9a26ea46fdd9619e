import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { EXAMPLES } from '../../src/cli/usage.js';
import { type ServerProcess, startServer } from '../process.js';
import { bash, withoutPlantStore } from '../cli/checkout-support.js';

// The README's walk-through, then the examples of docs/cli.md, run as printed, in that order, in
// one database, against one real server on a free port: each ```sh block right after a
// `<!-- walkthrough -->` comment is run by bash as one script, with a PATH on which no plant-store
// is found (a bare `plant-store` was "command not found" in a checkout, and `npm test`
// hid it). The README's runs in the checkout, whose first line puts bin/ on the PATH;
// docs/cli.md's run in a folder of their own (they write plants.ndjson and backups/), after the
// line of its `<!-- checkout-path -->` block, run in the checkout, with PLANT_STORE_URL set. The
// one change made to the text is the README's port: it says 127.0.0.1:8080, where `npm start`
// listens. Every `# → …` line (and the `#   …` lines under it) is output the command before it
// must print, as whole lines and in that order.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_ADDRESS = '127.0.0.1:8080';
const MARKER = '@@walkthrough-step@@';

interface Step {
  /** The command as the README prints it, continuation lines joined by their `\` and newline. */
  readonly command: string;
  /** The lines the README says it prints. */
  readonly expected: string[];
}

/** The walk-through blocks of a README: the fenced sh blocks that follow `<!-- walkthrough -->`. */
function walkthroughBlocks(readme: string): string[] {
  const blocks: string[] = [];
  for (const m of readme.matchAll(/<!--\s*walkthrough\s*-->\s*\n(?:\s*\n)*```(?:sh|bash|shell)\n([\s\S]*?)\n```/g)) {
    blocks.push(m[1]!);
  }
  return blocks;
}

/** A block's commands, each with the output lines printed under it. */
function walkthroughSteps(block: string): Step[] {
  const steps: { command: string; expected: string[] }[] = [];
  let pending: string[] = [];
  let expecting = false;
  for (const line of block.split('\n')) {
    const first = /^# → (.*)$/.exec(line);
    const more = /^# {3}(.*)$/.exec(line);
    if (first || (more && expecting)) {
      assert.ok(steps.length > 0 && pending.length === 0, `output with no command before it: ${line}`);
      steps.at(-1)!.expected.push((first ?? more)![1]!);
      expecting = true;
      continue;
    }
    expecting = false;
    if (pending.length === 0 && (line.trim() === '' || line.startsWith('#'))) continue;
    pending.push(line);
    if (!line.endsWith('\\')) {
      steps.push({ command: pending.join('\n'), expected: [] });
      pending = [];
    }
  }
  assert.equal(pending.length, 0, 'the block ends inside a command');
  return steps;
}

/** The lines a command printed: `\r` of HTTP header lines and trailing blanks dropped. */
const outputLines = (text: string): string[] => text.split('\n').map((line) => line.replace(/\s+$/, ''));

/** Runs a walk-through block as one bash script, failing on the first command that fails or prints other than the doc. */
async function runBlock(
  block: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  rewrite: (command: string) => string = (command) => command,
  prelude: string[] = [],
): Promise<Step[]> {
  const steps = walkthroughSteps(block);
  // One script, so that what a command sets (TOKEN=…) holds for the next; a marker line before each.
  const script = [
    'set -euo pipefail',
    ...prelude,
    ...steps.flatMap((step) => [`printf '\\n%s\\n' '${MARKER}'`, rewrite(step.command)]),
  ].join('\n');
  const run = await bash(
    script,
    cwd,
    // npm_config_offline: npx finds plant-store here, and must never ask a registry.
    { ...env, npm_config_offline: 'true', npm_config_update_notifier: 'false' },
    120_000,
  );
  const outputs = run.stdout.split(`\n${MARKER}\n`).slice(1);
  assert.equal(
    run.code,
    0,
    `the block failed (exit ${run.code}) at:\n${steps[outputs.length - 1]?.command}\n${run.stderr}\n${run.stdout}`,
  );
  assert.equal(outputs.length, steps.length, `every command ran:\n${run.stdout}`);
  steps.forEach((step, i) => {
    const lines = outputLines(outputs[i]!);
    let at = 0;
    for (const want of step.expected) {
      const found = lines.indexOf(want, at);
      assert.ok(
        found >= 0,
        `${step.command}\nshould print (in this order):\n${step.expected.join('\n')}\nbut printed:\n${outputs[i]}`,
      );
      at = found + 1;
    }
  });
  return steps;
}

const summary = (steps: Step[]): string =>
  `${steps.length} commands, ${steps.reduce((n, s) => n + s.expected.length, 0)} printed lines checked`;

describe("the README's walk-through, then docs/cli.md's examples, in one database", () => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-walkthrough-'));
  // The server and the command line share this database, as the checkout's default file would be shared.
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
  let server: ServerProcess;

  before(async () => {
    server = await startServer(env, ROOT);
  });
  after(async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the README: every command answers as printed, against a real server', async (t) => {
    const blocks = walkthroughBlocks(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    assert.ok(blocks.length > 0, 'README.md marks its walk-through: <!-- walkthrough --> before a ```sh block');
    const address = new URL(server.url).host;
    for (const block of blocks) {
      assert.ok(block.includes(README_ADDRESS), `the walk-through calls ${README_ADDRESS}, where npm start listens`);
      const steps = await runBlock(block, ROOT, { ...process.env, ...env, PATH: withoutPlantStore() }, (command) =>
        command.replaceAll(README_ADDRESS, address),
      );
      assert.ok(
        steps.some((step) => step.expected.length > 0),
        'the walk-through prints what its commands answer',
      );
      t.diagnostic(summary(steps));
    }
  });

  it("then docs/cli.md's examples, in the order printed, in the same database", async (t) => {
    const cli = readFileSync(join(ROOT, 'docs/cli.md'), 'utf8');
    const blocks = walkthroughBlocks(cli);
    assert.ok(blocks.length >= 4, 'docs/cli.md marks its examples: <!-- walkthrough --> before each ```sh block');
    // The first is the usage's examples, line for line.
    assert.deepEqual(
      walkthroughSteps(blocks[0]!).map((step) => step.command),
      EXAMPLES,
    );
    // The page's own first step, in the checkout's root, then each block in a folder of its own.
    const checkout = /<!--\s*checkout-path\s*-->\s*\n```sh\n(.+)\n```/.exec(cli)?.[1];
    assert.ok(checkout, 'docs/cli.md prints the line that puts plant-store on the PATH in a checkout');
    const work = join(dir, 'work');
    mkdirSync(work);
    const shellEnv = { ...process.env, ...env, PATH: withoutPlantStore(), PLANT_STORE_URL: server.url };
    const prelude = [`cd '${ROOT}'`, checkout, `cd '${work}'`];
    for (const block of blocks) {
      t.diagnostic(summary(await runBlock(block, work, shellEnv, undefined, prelude)));
    }
  });
});

describe('the walk-through reader', () => {
  it('joins continued lines, attaches each printed line to its command, and skips comments', () => {
    const steps = walkthroughSteps(
      [
        'URL=http://127.0.0.1:8080',
        '',
        '# a comment',
        'curl -s "$URL/a" \\',
        "  -d '{}'",
        '# → {"ok":1}',
        '#   second line',
        '#   ',
        'curl -si "$URL/b"',
        '# → HTTP/1.1 204 No Content',
        '# not output',
      ].join('\n'),
    );
    assert.deepEqual(steps, [
      { command: 'URL=http://127.0.0.1:8080', expected: [] },
      { command: 'curl -s "$URL/a" \\\n  -d \'{}\'', expected: ['{"ok":1}', 'second line', ''] },
      { command: 'curl -si "$URL/b"', expected: ['HTTP/1.1 204 No Content'] },
    ]);
  });

  it('finds only the blocks marked as the walk-through', () => {
    const readme = '```sh\nnot this\n```\n\n<!-- walkthrough -->\n\n```sh\nthis\n```\n';
    assert.deepEqual(walkthroughBlocks(readme), ['this']);
  });
});
