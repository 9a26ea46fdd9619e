import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { runCli } from '../process.js';

// `plant-store webhooks …`, the operator's view of every subject's webhooks.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-webhooks-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const freshDb = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({
  DATABASE_URL: `sqlite:${join(dir, `w-${n++}.db`)}`,
  ...extra,
});

/**
 * A fresh database with one webhook of alice's (to a closed local port), then `plants` (NDJSON
 * lines) imported: an import is a change too, and its plants' events give the webhook deliveries.
 */
async function aliceWebhookAfterImport(plants: string): Promise<{ env: NodeJS.ProcessEnv; id: string }> {
  const env = freshDb({ WEBHOOK_ALLOW_PRIVATE: '1' });
  const added = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', 'http://127.0.0.1:9/x', '--json'], env);
  const { id } = JSON.parse(added.stdout) as { id: string };
  const file = join(dir, `plants-${n}.ndjson`);
  writeFileSync(file, plants);
  assert.equal((await runCli(['import', file], env)).code, 0);
  return { env, id };
}

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
    hooks.map((h) => [h.id, h.subject, h.url, h.events, h.status]),
    [[id, 'alice', 'https://hooks.example.com/plants', ['plant.created', 'plant.deleted'], 'active']],
  );
  // The API's Webhook, and the subject it belongs to (docs/cli.md).
  assert.deepEqual(Object.keys(hooks[0]!).sort(), [
    'createdAt',
    'description',
    'destination',
    'disabledReason',
    'events',
    'failingSince',
    'id',
    'previousSecretExpiresAt',
    'status',
    'subject',
    'url',
  ]);
  assert.ok(!listed.stdout.includes(added.stdout.trim().slice(6)), 'no secret in the list');
  const table = await runCli(['webhooks', 'list'], env);
  assert.match(table.stdout, /^ID\s+SUBJECT\s+URL\s+EVENTS\s+STATUS\s+CREATED\s+OLD SECRET SIGNS UNTIL\n/);
  assert.match(
    table.stdout,
    new RegExp(
      `\\n${id}\\s+alice\\s+https://hooks\\.example\\.com/plants\\s+plant\\.created,plant\\.deleted\\s+active\\s+\\d{4}-`,
    ),
  );
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
    // What allows it in development, for this process (which checks it) and the server (which checks each delivery).
    assert.match(
      r.stderr,
      / \(WEBHOOK_ALLOW_PRIVATE=1 in this command's environment and the server's allows http:\/\/ and private addresses, for development only\)\n$/,
    );
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
  const { env, id } = await aliceWebhookAfterImport(
    '{"id":9223372036854775807,"owner":"alice","name":"fern"}\n{"id":2,"owner":"bob","name":"moss"}\n',
  );
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

test('webhooks deliveries pages with --before, and the hint after a page is the command for the next', async () => {
  const { env, id } = await aliceWebhookAfterImport(
    [1, 2, 3, 4, 5].map((n) => `{"id":${n},"owner":"alice","name":"p${n}"}\n`).join(''),
  );

  const whole = JSON.parse((await runCli(['webhooks', 'deliveries', id, '--json'], env)).stdout) as Array<{
    id: string;
  }>;
  assert.equal(whole.length, 5);
  // Follow the hints from the first page of two: the same deliveries, newest first, each once.
  const seen: string[] = [];
  let args = ['webhooks', 'deliveries', id, '--limit', '2', '--json'];
  for (let page = 0; page < 5; page++) {
    const listed = await runCli(args, env);
    assert.equal(listed.code, 0, listed.stderr);
    seen.push(...(JSON.parse(listed.stdout) as Array<{ id: string }>).map((d) => d.id));
    // The command as it runs from here (test/cli/checkout-command.test.ts runs it in a shell).
    const hint = /^Older deliveries follow: .*? (webhooks deliveries .+)$/m.exec(listed.stderr)?.[1];
    if (hint === undefined) break;
    args = hint.split(' ');
  }
  assert.deepEqual(
    seen,
    whole.map((d) => d.id),
  );
  // The table says the same, and the last page has no hint.
  const table = await runCli(['webhooks', 'deliveries', id, '--limit', '4'], env);
  assert.match(table.stderr, new RegExp(`--limit 4 --before ${whole[3]!.id}$`, 'm'));
  const last = await runCli(['webhooks', 'deliveries', id, '--before', whole[3]!.id], env);
  assert.equal(last.stdout.trim().split('\n').length, 2, 'the header and the oldest delivery');
  assert.doesNotMatch(last.stderr, /Older deliveries/);
  const none = await runCli(['webhooks', 'deliveries', id, '--before', whole[4]!.id], env);
  assert.match(none.stderr, new RegExp(`Webhook ${id} has no deliveries below ${whole[4]!.id}\\.`));
  for (const bad of ['x', '0', '-3', '1.5']) {
    const refused = await runCli(['webhooks', 'deliveries', id, '--before', bad], env);
    assert.equal(refused.code, 2, bad);
    assert.match(refused.stderr, /--before takes a delivery id/);
  }
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

test('webhooks update changes a webhook (exit 0), --json prints it; no change or a bad value is usage (exit 2); unknown id exit 1', async () => {
  const env = freshDb();
  const added = await runCli(
    ['webhooks', 'add', '--subject', 'alice', '--url', 'https://hooks.example.com/a', '--json'],
    env,
  );
  const { id } = JSON.parse(added.stdout) as { id: string };
  const updated = await runCli(
    [
      'webhooks',
      'update',
      id,
      '--url',
      'https://hooks.example.com/b',
      '--events',
      'plant.deleted',
      '--description',
      'CRM',
      '--status',
      'disabled',
      '--json',
    ],
    env,
  );
  assert.equal(updated.code, 0, updated.stderr);
  const webhook = JSON.parse(updated.stdout) as Record<string, unknown>;
  assert.deepEqual(
    [webhook.url, webhook.events, webhook.description, webhook.status, webhook.disabledReason],
    ['https://hooks.example.com/b', ['plant.deleted'], 'CRM', 'disabled', 'manual'],
  );
  const human = await runCli(['webhooks', 'update', id, '--status', 'active'], env);
  assert.equal(human.code, 0);
  assert.equal(human.stdout, '');
  assert.match(
    human.stderr,
    new RegExp(`Updated webhook ${id}: https://hooks.example.com/b \\(plant.deleted\\), active.`),
  );
  for (const bad of [[], ['--status', 'paused'], ['--events', 'plant.moved']]) {
    assert.equal((await runCli(['webhooks', 'update', id, ...bad], env)).code, 2, bad.join(' '));
  }
  const refused = await runCli(['webhooks', 'update', id, '--url', 'http://127.0.0.1/x'], env);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^plant-store: the webhook URL must/m);
  assert.equal((await runCli(['webhooks', 'update', 'wh_missing', '--description', 'x'], env)).code, 1);
  const help = await runCli(['webhooks', 'update', '--help'], env);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /webhooks update <webhook-id> \[--url/);
});

test('webhooks rotate prints the new secret alone on stdout; --overlap takes 0 to 7d; --json carries the secret', async () => {
  const env = freshDb();
  const added = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', 'https://hooks.example.com/a'], env);
  const id = /Created webhook (wh_[0-9A-Za-z]{16})/.exec(added.stderr)![1]!;
  const rotated = await runCli(['webhooks', 'rotate', id, '--overlap', '1h'], env);
  assert.equal(rotated.code, 0, rotated.stderr);
  assert.match(rotated.stdout, /^whsec_[A-Za-z0-9+/]{32}\n$/);
  assert.notEqual(rotated.stdout, added.stdout);
  assert.match(rotated.stderr, /the old one signs beside it for 1h/);
  const json = await runCli(['webhooks', 'rotate', id, '--overlap', '0', '--json'], env);
  assert.equal(json.code, 0, json.stderr);
  const body = JSON.parse(json.stdout) as { id: string; secret: string };
  assert.equal(body.id, id);
  assert.match(body.secret, /^whsec_/);
  for (const overlap of ['8d', 'soon', '-1s', '1500ms']) {
    assert.equal((await runCli(['webhooks', 'rotate', id, '--overlap', overlap], env)).code, 2, overlap);
  }
  assert.equal((await runCli(['webhooks', 'rotate', 'wh_missing'], env)).code, 1);
});

test('webhooks ping, recover and attempts: a pending ping, failed deliveries requeued, a delivery’s attempts', async () => {
  const env = freshDb({ WEBHOOK_ALLOW_PRIVATE: '1' });
  const added = await runCli(['webhooks', 'add', '--subject', 'alice', '--url', 'http://127.0.0.1:9/x', '--json'], env);
  const { id } = JSON.parse(added.stdout) as { id: string };
  const ping = await runCli(['webhooks', 'ping', id, '--json'], env);
  assert.equal(ping.code, 0, ping.stderr);
  assert.match(ping.stdout, /"type":"webhook\.ping","eventId":null,"status":"pending"/);
  const pingId = /"id":(\d+)/.exec(ping.stdout)![1]!;
  // What a dispatcher would have recorded: one failed attempt of the ping.
  const db = new Database(env.DATABASE_URL!.slice('sqlite:'.length));
  db.prepare("UPDATE deliveries SET status = 'failed', attempts = 1, created_at = 1000, next_attempt_at = NULL").run();
  db.prepare(
    `INSERT INTO delivery_attempts (delivery_id, webhook_id, attempt, at, status, duration_ms, error, response)
    VALUES (?, ?, 1, 1740821405412, NULL, 12, 'connection refused', NULL)`,
  ).run(pingId, id);
  db.close();
  const attempts = await runCli(['webhooks', 'attempts', id, pingId], env);
  assert.equal(attempts.code, 0, attempts.stderr);
  assert.match(
    attempts.stdout,
    /^ATTEMPT\s+AT\s+STATUS\s+MS\s+ERROR\s+RESPONSE\n1\s+2025-03-01T09:30:05.412Z\s+-\s+12\s+connection refused\s+-\n$/,
  );
  const attemptsJson = JSON.parse(
    (await runCli(['webhooks', 'attempts', id, pingId, '--json'], env)).stdout,
  ) as unknown;
  assert.deepEqual(attemptsJson, [
    {
      attempt: 1,
      at: '2025-03-01T09:30:05.412Z',
      status: null,
      durationMs: 12,
      error: 'connection refused',
      response: null,
    },
  ]);
  assert.equal((await runCli(['webhooks', 'attempts', id, 'x'], env)).code, 2);
  assert.equal((await runCli(['webhooks', 'attempts', id, '999'], env)).code, 1);
  const recovered = await runCli(['webhooks', 'recover', id, '--since', '1970-01-01T00:00:01Z', '--json'], env);
  assert.equal(recovered.code, 0, recovered.stderr);
  assert.deepEqual(JSON.parse(recovered.stdout), { requeued: 1, created: 0 });
  const none = await runCli(['webhooks', 'recover', id, '--since', '1970-01-01T00:00:01Z'], env);
  assert.match(
    none.stderr,
    /^0 failed deliveries of webhook wh_\w+ are pending again; 0 new ones for the events it was not sent while disabled\.$/m,
  );
  assert.equal((await runCli(['webhooks', 'recover', id], env)).code, 2, 'no --since');
  assert.equal((await runCli(['webhooks', 'recover', id, '--since', 'yesterday'], env)).code, 1);
});

test('webhooks add --broker makes a destination within what BROKERS allows; list shows it; mistakes are usage or 1', async () => {
  // `webhooks add` checks a destination against BROKERS; it reaches no broker.
  const env = freshDb({
    BROKERS: 'bus=amqp://u:s3cret@127.0.0.1:5672?allow=plants-x,events=nats://127.0.0.1:4222?allow=acme',
  });
  const nats = await runCli(
    ['webhooks', 'add', '--subject', 'alice', '--broker', 'events', '--broker-subject', 'acme.plants', '--json'],
    env,
  );
  assert.equal(nats.code, 0, nats.stderr);
  const created = JSON.parse(nats.stdout) as { id: string; url: unknown; destination: unknown };
  assert.equal(created.url, null);
  assert.deepEqual(created.destination, { broker: 'events', subject: 'acme.plants' });
  const rabbit = await runCli(
    ['webhooks', 'add', '--subject', 'bob', '--broker', 'bus', '--routing-key', 'plants'],
    env,
  );
  assert.equal(rabbit.code, 0, rabbit.stderr);
  assert.match(rabbit.stderr, /\nCreated webhook wh_\w{16} for bob: amqp:bus:plants \(plant\.created,plant\.deleted\)/);
  const listed = await runCli(['webhooks', 'list'], env);
  assert.match(listed.stdout, /alice\s+nats:events:acme\.plants\s/);
  assert.match(listed.stdout, /bob\s+amqp:bus:plants\s/);
  assert.doesNotMatch(listed.stdout + listed.stderr + rabbit.stderr, /s3cret/);

  const moved = await runCli(
    ['webhooks', 'update', created.id, '--broker', 'events', '--broker-subject', 'acme.mirror'],
    env,
  );
  assert.equal(moved.code, 0, moved.stderr);
  assert.match(moved.stderr, /Updated webhook wh_\w{16}: nats:events:acme\.mirror \(/);
  const toUrl = await runCli(['webhooks', 'update', created.id, '--url', 'https://hooks.example.com/x'], env);
  assert.equal(toUrl.code, 1, 'a destination stays a destination');
  assert.match(toUrl.stderr, /publishes to a destination: change its destination, not a url/);

  const outside = await runCli(
    ['webhooks', 'add', '--subject', 'alice', '--broker', 'events', '--broker-subject', 'other'],
    env,
  );
  assert.equal(outside.code, 1);
  assert.match(outside.stderr, /destination\.subject must be "acme" or start with "acme\."/);
  for (const args of [
    ['--broker', 'events'],
    ['--broker-subject', 'acme.x'],
    ['--broker', 'events', '--broker-subject', 'acme.x', '--routing-key', 'k'],
    ['--broker', 'events', '--broker-subject', 'acme.x', '--url', 'https://hooks.example.com/x'],
  ]) {
    const wrong = await runCli(['webhooks', 'add', '--subject', 'alice', ...args], env);
    assert.equal(wrong.code, 2, `${args.join(' ')}: ${wrong.stderr}`);
  }
});
