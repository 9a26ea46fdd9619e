import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli } from '../process.js';

// `plant-store webhooks deliveries` printed `null` in the EVENT column of a
// ping, which has no event (/portal shows "—"); the table shows `-`, as in its other empty cells.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-deliveries-ping-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}`, WEBHOOK_ALLOW_PRIVATE: '1' };

test("webhooks deliveries shows a ping's EVENT as -, not null", async () => {
  const added = await runCli(
    ['webhooks', 'add', '--subject', 'alice', '--url', 'http://127.0.0.1:9/hook', '--json'],
    env,
  );
  assert.equal(added.code, 0, added.stderr);
  const { id } = JSON.parse(added.stdout) as { id: string };
  const ping = await runCli(['webhooks', 'ping', id], env);
  assert.equal(ping.code, 0, ping.stderr);

  const listed = await runCli(['webhooks', 'deliveries', id], env);
  assert.equal(listed.code, 0, listed.stderr);
  const [header, ...rows] = listed.stdout
    .trimEnd()
    .split('\n')
    .map((line) => line.trim().split(/\s{2,}/));
  assert.deepEqual(header, ['ID', 'TYPE', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST', 'ERROR', 'NEXT']);
  assert.equal(rows.length, 1, listed.stdout);
  assert.deepEqual(rows[0]!.slice(1, 6), ['webhook.ping', '-', 'pending', '0', '-'], listed.stdout);
  assert.doesNotMatch(listed.stdout, /\bnull\b/);
  // --json keeps the API's null.
  const json = await runCli(['webhooks', 'deliveries', id, '--json'], env);
  assert.match(json.stdout, /"eventId":null/);
});
