import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type ServerProcess, callServer, runCli, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { userEnv } from './markdown.js';

// docs/events.md's shell poller (after `<!-- poller -->`), run as printed by bash with this
// machine's curl, sed and jq against a real server: every event once, in order, across pages
// (`next=/events?limit=2`, which the poller takes from its environment), the ids exact beyond
// 2^53 with Debian 12's jq 1.6 (which printed 9007199254740992 for 9007199254740993 before, issue
// 35 point 5), then a live event after an empty page. The changes made to the text: the port.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/events.md'), 'utf8');
const BIG = '9007199254740993';

const jqVersion = ((): string | undefined => {
  try {
    return execFileSync('jq', ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
})();

const dir = mkdtempSync(join(tmpdir(), 'plant-store-poller-'));
let server: ServerProcess | undefined;
let poller: ChildProcess | undefined;
after(async () => {
  if (poller && poller.exitCode === null && poller.signalCode === null) {
    const exited = once(poller, 'exit');
    process.kill(-poller.pid!, 'SIGTERM');
    await exited;
  }
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Printed {
  id: unknown;
  type: string;
  data: { id: unknown; name?: string };
}

test(
  'the shell poller of docs/events.md, as printed: every event once, in order, ids exact beyond 2^53',
  {
    timeout: 90_000,
    skip: jqVersion === undefined && process.env.CI !== 'true' ? 'no jq (apt-get install jq)' : false,
  },
  async () => {
    assert.ok(jqVersion, 'jq is installed (apt-get install jq)');
    const m = /<!-- poller -->\n+```sh\n([\s\S]*?)\n```/.exec(DOC);
    assert.ok(m, 'docs/events.md marks the poller: <!-- poller --> before a ```sh block');
    const printed = m[1]!;
    assert.ok(printed.includes('"localhost:8080$next"'), 'the poller asks localhost:8080');
    const shown = printed
      .split('\n')
      .filter((line) => line.startsWith('# {'))
      .map((line) => JSON.parse(line.slice(2)) as Printed);
    assert.equal(shown.length, 1, 'the block shows one line the poller prints');
    assert.equal(shown[0]!.data.id, BIG, 'the line shown has the id exact, as a string');

    const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, RATE_LIMIT: 'off' };
    server = await startServer(env);
    const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,plants:write'], env);
    assert.equal(minted.code, 0, minted.stderr);
    const token = minted.stdout.trim();
    const create = async (body: string): Promise<void> => {
      const answer = await callServer(server!, token, 'POST', '/plants', body);
      assert.equal(answer.status, 200, answer.text);
    };
    await create(`{"id": ${BIG}, "name": "Monstera", "tag": "tropical"}`);
    await create('{"id": 9007199254740992, "name": "Ficus"}');
    await create('{"id": -9223372036854775808, "name": "Lowest"}');

    let out = '';
    let errors = '';
    const script = printed.replace('localhost:8080', server.url.replace('http://', ''));
    poller = spawn('bash', ['-c', script], {
      cwd: dir,
      detached: true, // its own process group: curl, sed, jq and sleep are stopped with it
      env: { ...userEnv(), TOKEN: token, next: '/events?limit=2', TMPDIR: dir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    poller.stdout!.on('data', (chunk: Buffer) => void (out += chunk.toString()));
    poller.stderr!.on('data', (chunk: Buffer) => void (errors += chunk.toString()));
    const lines = async (n: number): Promise<Printed[]> =>
      eventually(
        async () => {
          const got = out.split('\n').filter((line) => line !== '');
          return got.length >= n ? got.map((line) => JSON.parse(line) as Printed) : undefined;
        },
        () => `the poller printed ${n} events (stdout: ${out}; stderr: ${errors})`,
        30_000,
      );

    const first = await lines(3);
    assert.deepEqual(
      first.map((e) => [e.id, e.type, e.data.id, e.data.name]),
      [
        ['1', 'plant.created', BIG, 'Monstera'],
        ['2', 'plant.created', '9007199254740992', 'Ficus'],
        ['3', 'plant.created', '-9223372036854775808', 'Lowest'],
      ],
      `with ${jqVersion}`,
    );
    // Caught up, it keeps asking: the next event comes once, after the empty page.
    const deleted = await callServer(server, token, 'DELETE', `/plants/${BIG}`);
    assert.equal(deleted.status, 204, deleted.text);
    const all = await lines(4);
    assert.equal(all.length, 4, out);
    assert.deepEqual([all[3]!.id, all[3]!.type, all[3]!.data.id], ['4', 'plant.deleted', BIG]);
    assert.equal(errors, '');
    assert.deepEqual(
      readdirSync(dir).filter((name) => !name.startsWith('plants.db') && !name.startsWith('tmp.')),
      [],
      'the poller writes no file into the folder it runs in',
    );
  },
);
