import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ServerProcess, mintCliToken, startServer, callServer } from '../process.js';
import { promtool, sample } from '../support/scrape.js';
import { Receiver } from './webhook-receiver.js';
import { eventually } from '../support/eventually.js';

// What an operator sees of the event side on real `plant-store serve` processes:
// a scrape that promtool accepts, WEBHOOK_DELIVERY=off, and stored secrets checked at start.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-operator-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';
const DEADLINE_MS = 20_000;

type T = { after: (fn: () => unknown) => void };

async function server(t: T, env: NodeJS.ProcessEnv): Promise<ServerProcess> {
  const started = await startServer(env);
  t.after(() => started.stop());
  return started;
}

async function subscribe(s: ServerProcess, token: string, receiver: Receiver): Promise<string> {
  const r = await callServer(s, token, 'POST', '/webhooks', JSON.stringify({ url: receiver.url }));
  assert.equal(r.status, 201, r.text);
  const created = JSON.parse(r.text) as { id: string; secret: string };
  receiver.secret = created.secret;
  return created.id;
}

async function scrape(s: ServerProcess): Promise<string> {
  const response = await fetch(`${s.url}/metrics`);
  assert.equal(response.status, 200);
  return response.text();
}

/** Waits for `probe` to answer something, up to DEADLINE_MS. */
const until = <T>(what: string, probe: () => Promise<T | undefined>): Promise<T> =>
  eventually(probe, what, DEADLINE_MS);

/** The JSON log lines of a server at `level` (pino's number) whose message matches. */
const lines = (s: ServerProcess, level: number, msg: RegExp): Array<Record<string, unknown>> =>
  s
    .logs()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.level === level && msg.test(String(line.msg)));

test('a scrape after deliveries passes `promtool check metrics` with nothing to say, and counts them', async (t) => {
  const env = { DATABASE_URL: `sqlite:${join(dir, 'scrape.db')}`, WEBHOOK_ALLOW_PRIVATE: '1', RATE_LIMIT: 'off' };
  const token = await mintCliToken(env, 'alice', SCOPES);
  const s = await server(t, env);
  const receiver = new Receiver();
  await receiver.start();
  t.after(() => receiver.stop());
  await subscribe(s, token, receiver);
  for (const id of [1, 2, 3]) {
    assert.equal((await callServer(s, token, 'POST', '/plants', `{"id":${id},"name":"fern"}`)).status, 200);
  }
  await receiver.until((r) => r.length >= 3);
  const text = await until('the three attempts counted', async () => {
    const scraped = await scrape(s);
    return sample(scraped, 'plant_store_webhook_attempts_total', { result: 'delivered' }) === 3 ? scraped : undefined;
  });
  assert.equal(sample(text, 'plant_store_webhook_attempts_total', { result: 'http_error' }), 0);
  assert.equal(sample(text, 'plant_store_webhook_attempt_duration_seconds_count'), 3);
  assert.equal(sample(text, 'plant_store_webhooks', { status: 'active' }), 1);
  assert.equal(sample(text, 'plant_store_event_streams'), 0);
  assert.ok(sample(text, 'plant_store_webhook_backlog')! >= 0);

  const checked = promtool(['check', 'metrics'], text);
  assert.equal(checked.output, '', 'promtool has nothing to say');
  assert.equal(checked.code, 0);
});

test('WEBHOOK_DELIVERY=off serves everything and sends nothing; the deliveries wait for a server that sends', async (t) => {
  const env = { DATABASE_URL: `sqlite:${join(dir, 'off.db')}`, WEBHOOK_ALLOW_PRIVATE: '1', RATE_LIMIT: 'off' };
  const token = await mintCliToken(env, 'alice', SCOPES);
  const quiet = await server(t, { ...env, WEBHOOK_DELIVERY: 'off' });
  assert.equal(lines(quiet, 30, /^plant-store serving$/)[0]?.webhookDelivery, 'off');
  assert.equal(lines(quiet, 30, /^webhook delivery is off/).length, 1);
  const receiver = new Receiver();
  await receiver.start();
  t.after(() => receiver.stop());
  const hook = await subscribe(quiet, token, receiver);
  for (const id of [1, 2]) {
    assert.equal((await callServer(quiet, token, 'POST', '/plants', `{"id":${id},"name":"fern"}`)).status, 200);
  }
  // Nothing sent so far; and below, nothing sent all the while another process starts and
  // delivers: a process that sent would have been woken by its own commits at once.
  const listed = await callServer(quiet, token, 'GET', `/webhooks/${hook}/deliveries`);
  assert.equal(listed.status, 200);
  const deliveries = JSON.parse(listed.text) as Array<{ status: string; attempts: number }>;
  assert.deepEqual(
    deliveries.map((d) => [d.status, d.attempts]),
    [
      ['pending', 0],
      ['pending', 0],
    ],
  );
  assert.equal(receiver.received.length, 0);
  const text = await scrape(quiet);
  assert.equal(sample(text, 'plant_store_webhook_backlog'), 2);
  assert.equal(sample(text, 'plant_store_webhook_attempts_total', { result: 'delivered' }), 0);

  const sending = await server(t, env); // a process that sends, on the same database
  await receiver.until((r) => r.length >= 2);
  await until('the sending process counted its two deliveries', async () =>
    sample(await scrape(sending), 'plant_store_webhook_attempts_total', { result: 'delivered' }) === 2
      ? true
      : undefined,
  );
  assert.deepEqual(
    receiver.received.map((r) => r.verified),
    [true, true],
  );
  const after = await callServer(quiet, token, 'GET', `/webhooks/${hook}/deliveries`);
  assert.deepEqual(
    (JSON.parse(after.text) as Array<{ status: string; attempts: number }>).map((d) => [d.status, d.attempts]),
    [
      ['delivered', 1],
      ['delivered', 1],
    ],
    'each delivered once, by the sending process',
  );
  const quietAfter = await scrape(quiet);
  assert.equal(
    sample(quietAfter, 'plant_store_webhook_attempt_duration_seconds_count'),
    0,
    'the quiet process attempted nothing',
  );
});

test('stored secrets that do not open with SECRETS_KEY are one error line at start, naming the webhooks', async (t) => {
  const keyA = randomBytes(32).toString('base64');
  const env = { DATABASE_URL: `sqlite:${join(dir, 'secrets.db')}`, WEBHOOK_ALLOW_PRIVATE: '1', SECRETS_KEY: keyA };
  const token = await mintCliToken(env, 'alice', SCOPES);
  const first = await startServer(env);
  const r = await callServer(first, token, 'POST', '/webhooks', JSON.stringify({ url: 'http://127.0.0.1:9/hook' }));
  assert.equal(r.status, 201, r.text);
  const { id, secret } = JSON.parse(r.text) as { id: string; secret: string };
  assert.deepEqual(lines(first, 50, /./), [], 'with its own key: no error');
  await first.stop();

  const otherKey = await server(t, { ...env, SECRETS_KEY: randomBytes(32).toString('base64') });
  const errors = lines(otherKey, 50, /./);
  assert.equal(errors.length, 1, otherKey.logs());
  assert.match(String(errors[0]?.msg), /do not open with this SECRETS_KEY/);
  assert.deepEqual([errors[0]?.webhooks, errors[0]?.ids], [1, [id]]);
  await otherKey.stop();

  const noKey = await server(t, { ...env, SECRETS_KEY: '' });
  const unset = lines(noKey, 50, /./);
  assert.equal(unset.length, 1, noKey.logs());
  assert.match(String(unset[0]?.msg), /SECRETS_KEY is not set/);
  for (const s of [first, otherKey, noKey]) {
    assert.ok(!s.logs().includes(secret.slice(6)) && !s.logs().includes(keyA), 'neither secret nor key in the log');
  }
});
