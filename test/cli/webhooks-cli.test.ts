import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { runCli } from '../process.js';

// Issue 14: `plant-store webhooks …`, the operator's view of every subject's webhooks.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-webhooks-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const freshDb = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  DATABASE_URL: `sqlite:${join(dir, `w-${n++}.db`)}`,
  ...extra,
});

test('webhooks add prints the secret alone on stdout; list shows it without the secret; remove deletes it', async () => {
  const env = freshDb();
  const added = await runCli(
    ['webhooks', 'add', '--subject', 'alice', '--url', 'https://hooks.example.com/plants'],
    env,
  );
  assert.equal(added.code, 0, added.stderr);
  assert.match(added.stdout, /^whsec_[A-Za-z0-9+/]{32}\n$/);
  const id = /Created webhook (wh_[0-9A-Za-z]{16}) for alice/.exec(added.stderr)?.[1];
  assert.ok(id, added.stderr);
  const listed = await runCli(['webhooks', 'list', '--json'], env);
  assert.equal(listed.code, 0);
  const hooks = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
  assert.deepEqual(
    hooks.map((h) => [h.id, h.url, h.events, h.status]),
    [[id, 'https://hooks.example.com/plants', ['plant.created', 'plant.deleted'], 'active']],
  );
  assert.ok(!listed.stdout.includes(added.stdout.trim().slice(6)), 'no secret in the list');
  const table = await runCli(['webhooks', 'list'], env);
  assert.match(table.stdout, /^ID\s+URL\s+EVENTS\s+STATUS\s+CREATED\n/);
  assert.equal((await runCli(['webhooks', 'list', '--subject', 'bob', '--json'], env)).stdout.trim(), '[]');
  const removed = await runCli(['webhooks', 'remove', id], env);
  assert.equal(removed.code, 0);
  assert.match(removed.stderr, new RegExp(`Removed webhook ${id}`));
  const again = await runCli(['webhooks', 'remove', id], env);
  assert.equal(again.code, 1);
  assert.match(again.stderr, /no webhook wh_/);
});

test('webhooks add refuses a private or non-https URL (exit 1) unless WEBHOOK_ALLOW_PRIVATE=1, and bad usage (exit 2)', async () => {
  const env = freshDb();
  for (const url of ['http://hooks.example.com/x', 'https://127.0.0.1/x', 'https://10.1.2.3/x']) {
    const r = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', url], env);
    assert.equal(r.code, 1, url);
    assert.match(r.stderr, /^plant-store: the webhook URL must/m);
    assert.equal(r.stdout, '');
  }
  const allowed = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', 'http://127.0.0.1:9/x', '--json'], {
    ...env,
    WEBHOOK_ALLOW_PRIVATE: '1',
  });
  assert.equal(allowed.code, 0, allowed.stderr);
  assert.equal((JSON.parse(allowed.stdout) as { subject: string }).subject, 'alice');
  assert.equal((await runCli(['webhooks', 'add', '--url', 'https://x.example/'], env)).code, 2);
  assert.equal(
    (await runCli(['webhooks', 'add', '--subject', 'a', '--url', 'https://x.example/', '--events', 'plant.moved'], env))
      .code,
    2,
  );
  assert.equal((await runCli(['webhooks', 'frobnicate'], env)).code, 2);
});

test('webhooks deliveries lists what an event produced; retry makes a failed one pending again; enable', async () => {
  const env = freshDb({ WEBHOOK_ALLOW_PRIVATE: '1' });
  const added = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', 'http://127.0.0.1:9/x', '--json'], env);
  const { id } = JSON.parse(added.stdout) as { id: string };
  // An import is a change too: its plants' events give this webhook its deliveries.
  const file = join(dir, 'plants.ndjson');
  const { writeFileSync } = await import('node:fs');
  writeFileSync(
    file,
    '{"id":9223372036854775807,"owner":"alice","name":"fern"}\n{"id":2,"owner":"bob","name":"moss"}\n',
  );
  assert.equal((await runCli(['import', file], env)).code, 0);
  const listed = await runCli(['webhooks', 'deliveries', id, '--json'], env);
  assert.equal(listed.code, 0, listed.stderr);
  const deliveries = JSON.parse(listed.stdout) as Array<{ id: string; type: string; status: string }>;
  assert.deepEqual(
    deliveries.map((d) => [d.type, d.status]),
    [['plant.created', 'pending']],
    "only alice's plant: bob's is not hers",
  );
  // Mark it failed and the webhook disabled, as a 410 would, then retry and enable.
  const db = new Database(env.DATABASE_URL!.slice('sqlite:'.length));
  db.prepare("UPDATE deliveries SET status = 'failed', next_attempt_at = NULL").run();
  db.prepare("UPDATE webhooks SET status = 'disabled'").run();
  db.close();
  assert.equal((await runCli(['webhooks', 'retry', id, deliveries[0]!.id], env)).code, 0);
  assert.equal((await runCli(['webhooks', 'retry', id, '999'], env)).code, 1);
  assert.equal((await runCli(['webhooks', 'retry', id, 'x'], env)).code, 2);
  const after = JSON.parse((await runCli(['webhooks', 'deliveries', id, '--json'], env)).stdout) as Array<{
    status: string;
  }>;
  assert.equal(after[0]!.status, 'pending');
  assert.equal((await runCli(['webhooks', 'enable', id], env)).code, 0);
  const hooks = JSON.parse((await runCli(['webhooks', 'list', '--json'], env)).stdout) as Array<{ status: string }>;
  assert.equal(hooks[0]!.status, 'active');
});

test('with SECRETS_KEY the stored secret is sealed, never the secret itself', async () => {
  const key = randomBytes(32).toString('base64');
  const env = freshDb({ SECRETS_KEY: key });
  const added = await runCli(
    ['webhooks', 'add', '--subject', 'alice', '--url', 'https://hooks.example.com/x', '--json'],
    env,
  );
  const { secret } = JSON.parse(added.stdout) as { secret: string };
  const db = new Database(env.DATABASE_URL!.slice('sqlite:'.length), { readonly: true });
  const stored = db.prepare('SELECT secret FROM webhooks').pluck().get() as string;
  db.close();
  assert.match(stored, /^aes-256-gcm:/);
  assert.ok(!stored.includes(secret.slice(6)));
  const bad = await runCli(['webhooks', 'list'], { ...env, SECRETS_KEY: 'too-short' });
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /SECRETS_KEY must be 32 bytes/);
});
