import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import type { Store } from '../../src/store/store.js';
import type { WebhookRecord } from '../../src/store/webhook-store.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { checkPrivateTargets, checkStoredSecrets, checkStoredWebhooks } from '../../src/webhooks/secret-check.js';
import { loadConfig } from '../../src/config.js';
import { settingsSummary } from '../../src/launch.js';
import { openTestStore } from '../helpers.js';

// At start, `serve` opens every stored webhook secret once with its SECRETS_KEY
// (docs/api.md#delivery): one error line naming how many and which do not open, never a secret.

interface Line {
  level: string;
  fields: Record<string, unknown>;
  message: string;
}

function collector(): { log: FastifyBaseLogger; lines: Line[] } {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown>, message: string): void =>
      void lines.push({ level, fields, message });
  return { log: { error: at('error'), warn: at('warn'), info: at('info') } as unknown as FastifyBaseLogger, lines };
}

const SECRET = 'whsec_c2VjcmV0IHRoYXQgbXVzdCBuZXZlciBiZSBsb2dnZWQ=';

async function storeWith(sealedBy: Array<SecretBox>): Promise<{ store: Store; ids: string[] }> {
  const store = await openTestStore();
  await store.migrate();
  const ids: string[] = [];
  for (const [i, box] of sealedBy.entries()) {
    const id = `wh_check${i}`;
    const record: WebhookRecord = {
      id,
      owner: `user${i}`,
      allPlants: false,
      url: 'https://hooks.example.com/plants',
      events: ['plant.created'],
      status: 'active',
      secret: box.seal(SECRET, id),
      createdAt: Date.UTC(2026, 0, 1),
      description: '',
      failingSince: null,
      disabledReason: null,
      previousSecret: null,
      previousSecretUntil: null,
    };
    assert.equal(await store.createWebhook(record, 20), true);
    ids.push(id);
  }
  return { store, ids };
}

const keyA = new SecretBox(randomBytes(32));
const keyB = new SecretBox(randomBytes(32));
const noKey = new SecretBox(null);

test('secrets sealed with another key: one error line naming how many and which, never a secret', async (t) => {
  const { store, ids } = await storeWith([keyA, keyB, keyA]);
  t.after(() => store.close());
  const { log, lines } = collector();
  checkStoredSecrets(await store.listWebhooks(null), keyB, log);
  assert.equal(lines.length, 1, JSON.stringify(lines));
  const [line] = lines;
  assert.equal(line?.level, 'error');
  assert.match(line.message, /do not open with this SECRETS_KEY/);
  assert.deepEqual(line?.fields, { webhooks: 2, ids: [ids[0], ids[2]].sort(), secretsKey: 'set' });
  assert.ok(!JSON.stringify(lines).includes(SECRET.slice(6)), 'no secret in the log');
});

test('sealed secrets and no SECRETS_KEY: the error says the key is not set', async (t) => {
  const { store, ids } = await storeWith([keyA]);
  t.after(() => store.close());
  const { log, lines } = collector();
  checkStoredSecrets(await store.listWebhooks(null), noKey, log);
  assert.deepEqual(
    lines.map((l) => [l.level, l.fields]),
    [['error', { webhooks: 1, ids, secretsKey: 'not set' }]],
  );
  assert.match(lines[0]!.message, /encrypted and SECRETS_KEY is not set/);
});

test('secrets stored unencrypted while a key is set still open: a warning, not an error', async (t) => {
  const { store, ids } = await storeWith([noKey, keyA]);
  t.after(() => store.close());
  const { log, lines } = collector();
  checkStoredSecrets(await store.listWebhooks(null), keyA, log);
  assert.deepEqual(
    lines.map((l) => [l.level, l.fields]),
    [['warn', { webhooks: 1, ids: [ids[0]] }]],
  );
});

test('every secret opens: nothing is said', async (t) => {
  for (const [box, sealedBy] of [
    [keyA, [keyA, keyA]],
    [noKey, [noKey]],
  ] as const) {
    const { store } = await storeWith([...sealedBy]);
    t.after(() => store.close());
    const { log, lines } = collector();
    checkStoredSecrets(await store.listWebhooks(null), box, log);
    assert.deepEqual(lines, []);
  }
});

test('a database that cannot be read: a warning, and the start goes on', async () => {
  const { log, lines } = collector();
  const store = { listWebhooks: () => Promise.reject(new Error('connection refused')) };
  await checkStoredWebhooks(store, keyA, false, log);
  assert.equal(lines.length, 1);
  assert.equal(lines[0]?.level, 'warn');
});

test('without WEBHOOK_ALLOW_PRIVATE, stored http:// and private targets are one warn line naming how many, which and whose', async (t) => {
  const { store, ids } = await storeWith([noKey, noKey, noKey, noKey]);
  t.after(() => store.close());
  const urls = ['http://hooks.example.com/plants', 'https://127.0.0.1:8443/x', 'https://10.1.2.3/x'];
  for (const [i, url] of urls.entries()) {
    const changed = await store.updateWebhook(ids[i]!, null, { url });
    assert.ok(changed, url);
  }
  const { log, lines } = collector();
  checkPrivateTargets(await store.listWebhooks(null), false, log);
  assert.equal(lines.length, 1);
  assert.equal(lines[0]!.level, 'warn');
  assert.deepEqual(lines[0]!.fields, { webhooks: 3, ids: ids.slice(0, 3), owners: ['user0', 'user1', 'user2'] });
  assert.match(lines[0]!.message, /WEBHOOK_ALLOW_PRIVATE is off/);

  const allowed = collector();
  checkPrivateTargets(await store.listWebhooks(null), true, allowed.log);
  assert.deepEqual(allowed.lines, [], 'allowed: nothing to say');
  const { store: clean } = await storeWith([noKey]);
  t.after(() => clean.close());
  const none = collector();
  checkPrivateTargets(await clean.listWebhooks(null), false, none.log);
  assert.deepEqual(none.lines, [], 'only public https targets: nothing to say');
});

test('the start-up line names WEBHOOK_ALLOW_PRIVATE when it is on, and only then', () => {
  assert.equal('webhookAllowPrivate' in settingsSummary(loadConfig({})), false);
  assert.match(
    String(settingsSummary(loadConfig({ WEBHOOK_ALLOW_PRIVATE: '1' })).webhookAllowPrivate),
    /^on: http:\/\/ and private addresses are allowed \(development only\)$/,
  );
});
