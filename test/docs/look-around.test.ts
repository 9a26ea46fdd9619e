import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BIN, runCli } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/postgres.js';

// "Look around a backup" (docs/operations.md), run as printed: the lines after
// `<!-- look-around -->`, by bash, in a folder holding two backups (the newest is looked at), with
// `plant-store` installed there (node_modules/.bin) and on the PATH. The backup holds a webhook with pending
// deliveries (a ping, and imported plants' events not yet made into deliveries) to a receiver that
// listens on 127.0.0.1 (so WEBHOOK_ALLOW_PRIVATE=1: a sending server could reach it, as it would
// reach real receivers). The second server serves the backup's data; nothing reaches the receiver,
// and the backup's bytes do not change, with no -wal or -shm beside it. The changes made to the
// text: the port (the copy's folder is mktemp's, under the TMPDIR the test gives it). The
// lines once named a fixed date's backup and a fixed path in the shared /tmp.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOC = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
const BACKUP = 'backups/plant-store-2026-05-01.db';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-look-around-'));
const received: string[] = [];
const receiver: Server = createServer((req, res) => {
  received.push(`${req.method} ${req.url} ${String(req.headers['webhook-id'])}`);
  req.resume();
  res.writeHead(204).end();
});
let second: ChildProcess | undefined;

after(async () => {
  if (second && second.exitCode === null && second.signalCode === null) {
    const exited = once(second, 'exit');
    process.kill(-second.pid!, 'SIGTERM');
    await exited;
  }
  receiver.closeAllConnections();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
});

const digest = (path: string): string => createHash('sha256').update(readFileSync(path)).digest('hex');

test(
  'a second server over a backup, as docs/operations.md prints it, delivers nothing and leaves the backup unchanged',
  { timeout: 90_000 },
  async () => {
    const m = /<!-- look-around -->\n+```sh\n([\s\S]*?)\n```/.exec(DOC);
    assert.ok(m, 'docs/operations.md marks the look-around lines: <!-- look-around --> before a ```sh block');
    const printed = m[1]!;
    assert.ok(printed.includes('backups/plant-store-'), 'the lines open a backup of backups/');
    assert.doesNotMatch(printed, /\d{4}-\d{2}-\d{2}/, 'no fixed date: the newest backup, whatever day it is');
    assert.doesNotMatch(printed, /\/tmp\//, 'no fixed path in the shared /tmp');
    assert.ok(printed.includes('PORT=8081'));

    receiver.listen(0, '127.0.0.1');
    await once(receiver, 'listening');
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    // The live database: a token, a webhook to the receiver, plants (their events), a pending ping.
    mkdirSync(join(dir, 'data'));
    const live = { DATABASE_URL: 'sqlite:data/plant-store.db', WEBHOOK_ALLOW_PRIVATE: '1' };
    const cli = async (args: string[]): Promise<string> => {
      const r = await runCli(args, live, dir);
      assert.equal(r.code, 0, `${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const token = (
      await cli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:read,webhooks:read'])
    ).trim();
    const hook = JSON.parse(await cli(['webhooks', 'add', '--subject', 'alice', '--url', hookUrl, '--json'])) as {
      id: string;
    };
    writeFileSync(join(dir, 'plants.ndjson'), '{"id":9007199254740993,"owner":"alice","name":"Monstera"}\n');
    await cli(['import', 'plants.ndjson']);
    await cli(['backup', 'backups/plant-store-2026-04-30.db']); // an older one, without the ping
    await cli(['webhooks', 'ping', hook.id]);
    await cli(['backup', BACKUP]);
    const before = digest(join(dir, BACKUP));

    // `plant-store` on the PATH, as the docs have it (a checkout's bin/, or an install's .bin).
    mkdirSync(join(dir, 'node_modules/.bin'), { recursive: true });
    symlinkSync(BIN, join(dir, 'node_modules/.bin/plant-store'));
    const port = await freePort();
    const tmp = join(dir, 'tmp');
    mkdirSync(tmp);
    const script = printed.replace('PORT=8081', `PORT=${port}`);
    let out = '';
    let errors = '';
    second = spawn('bash', ['-c', `set -eu\n${script}`], {
      cwd: dir,
      detached: true, // its own process group: bash and the server under it are stopped together
      env: {
        ...Object.fromEntries(
          Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name) && name !== 'NODE_OPTIONS'),
        ),
        WEBHOOK_ALLOW_PRIVATE: '1',
        TMPDIR: tmp,
        PATH: `${join(dir, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
        npm_config_offline: 'true',
        npm_config_update_notifier: 'false',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    second.stdout!.on('data', (chunk: Buffer) => void (out += chunk.toString()));
    second.stderr!.on('data', (chunk: Buffer) => void (errors += chunk.toString()));

    // Until it serves and has said it sends nothing, or until something reached the receiver.
    await eventually(
      async () => {
        if (second!.exitCode !== null) assert.fail(`the second server exited ${second!.exitCode}: ${errors}${out}`);
        if (received.length > 0) return true;
        return out.includes('Server listening at') && out.includes('webhook delivery is off') ? true : undefined;
      },
      () => `the second server started (stdout: ${out.slice(-2000)}; stderr: ${errors})`,
      30_000,
    );
    assert.deepEqual(received, [], 'nothing was delivered');
    // It serves the backup's data: the webhook, its ping still pending, never attempted.
    const url = `http://127.0.0.1:${port}`;
    const auth = { authorization: `Bearer ${token}` };
    const deliveries = (await (
      await fetch(`${url}/webhooks/${hook.id}/deliveries`, { headers: auth })
    ).json()) as Array<{
      type: string;
      status: string;
      attempts: number;
    }>;
    assert.ok(
      deliveries.some((d) => d.type === 'webhook.ping' && d.status === 'pending' && d.attempts === 0),
      JSON.stringify(deliveries),
    );
    // It has the copy open, in a folder of its own, not the backup.
    const folders = readdirSync(tmp);
    assert.equal(folders.length, 1, 'mktemp -d made one folder');
    assert.ok(existsSync(join(tmp, folders[0]!, 'look-around.db-wal')), 'the server opened the copy');
    assert.deepEqual(readdirSync(join(dir, 'backups')), ['plant-store-2026-04-30.db', 'plant-store-2026-05-01.db']);

    const exited = once(second, 'exit');
    process.kill(-second.pid!, 'SIGTERM');
    await exited;
    assert.deepEqual(received, [], 'nothing was delivered');
    assert.equal(digest(join(dir, BACKUP)), before, 'the backup is unchanged');
    assert.deepEqual(readdirSync(join(dir, 'backups')), ['plant-store-2026-04-30.db', 'plant-store-2026-05-01.db']);
  },
);
