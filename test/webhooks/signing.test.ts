import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { DEFAULT_RETRY_SCHEDULE, parseRetrySchedule } from '../../src/config.js';
import { outcomeOf } from '../../src/webhooks/dispatcher.js';
import { retryAfterMs } from '../../src/webhooks/outcome.js';
import { SecretBox, SecretKeyError } from '../../src/webhooks/secret-box.js';
import { newWebhookSecret, signDelivery } from '../../src/webhooks/signing.js';

// What a receiver verifies, how secrets rest, and what each attempt's answer means.

test('a new secret is whsec_ and the base64 of 24 random bytes, different every time', () => {
  const secrets = new Set(Array.from({ length: 100 }, newWebhookSecret));
  assert.equal(secrets.size, 100);
  for (const secret of secrets) {
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(Buffer.from(secret.slice(6), 'base64').length, 24);
  }
});

test('signDelivery produces what the standardwebhooks package verifies, and nothing else verifies', () => {
  const secret = newWebhookSecret();
  const body = '{"id":9223372036854775807,"name":"fern"}';
  const now = Math.floor(Date.now() / 1000);
  const headers = signDelivery(secret, 'evt_42', now, body);
  assert.equal(headers['webhook-id'], 'evt_42');
  assert.equal(headers['webhook-timestamp'], String(now));
  assert.match(headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
  const verifier = new Webhook(secret);
  assert.doesNotThrow(() => verifier.verify(body, { ...headers }));
  assert.throws(() => verifier.verify(body.replace('fern', 'moss'), { ...headers }), 'another body');
  assert.throws(() => new Webhook(newWebhookSecret()).verify(body, { ...headers }), 'another secret');
  assert.throws(() => verifier.verify(body, { ...headers, 'webhook-id': 'evt_43' }), 'another id');
  const stale = signDelivery(secret, 'evt_42', now - 3600, body);
  assert.throws(() => verifier.verify(body, { ...stale }), 'a timestamp an hour old');
});

test('SecretBox: with a key, secrets are sealed (AES-256-GCM), open only with the key and for their own webhook', () => {
  const key = randomBytes(32);
  const box = new SecretBox(key);
  const secret = newWebhookSecret();
  const sealed = box.seal(secret, 'wh_1');
  assert.ok(sealed.startsWith('aes-256-gcm:'));
  assert.ok(!sealed.includes(secret.slice(6)), 'the stored text does not contain the secret');
  assert.notEqual(box.seal(secret, 'wh_1'), sealed, 'a fresh nonce every time');
  assert.equal(box.open(sealed, 'wh_1'), secret);
  assert.throws(() => box.open(sealed, 'wh_2'), SecretKeyError, 'bound to its webhook id');
  assert.throws(() => new SecretBox(randomBytes(32)).open(sealed, 'wh_1'), /does not open with this SECRETS_KEY/);
  assert.throws(() => new SecretBox(null).open(sealed, 'wh_1'), /SECRETS_KEY is not set/);
  const raw = Buffer.from(sealed.slice('aes-256-gcm:'.length), 'base64');
  raw[raw.length - 1]! ^= 1; // one bit of the ciphertext flipped
  const tampered = `aes-256-gcm:${raw.toString('base64')}`;
  assert.throws(() => box.open(tampered, 'wh_1'), SecretKeyError);
});

test('SecretBox: without a key, secrets are stored as they are, and a key of the wrong size is refused', () => {
  const box = new SecretBox(null);
  assert.equal(box.seal('whsec_x', 'wh_1'), 'plain:whsec_x');
  assert.equal(box.open('plain:whsec_x', 'wh_1'), 'whsec_x');
  assert.equal(
    new SecretBox(randomBytes(32)).open('plain:whsec_x', 'wh_1'),
    'whsec_x',
    'a key set later still reads them',
  );
  assert.throws(() => new SecretBox(randomBytes(16)), /32 bytes/);
});

const settings = { retrySchedule: parseRetrySchedule(DEFAULT_RETRY_SCHEDULE), disableAfterFailingMs: 5 * 86_400_000 };

test('an attempt: 2xx delivered, 410 failed and disabling, anything else retried on the schedule with ±20 % jitter, then failed', () => {
  assert.deepEqual(outcomeOf(1, { status: 204, durationMs: 3 }, settings), {
    status: 'delivered',
    lastStatus: 204,
    lastError: null,
    retryInMs: null,
    healthy: true,
    disable: null,
    disableWhenFailingForMs: 5 * 86_400_000,
    durationMs: 3,
    response: null,
  });
  const gone = outcomeOf(1, { status: 410, durationMs: 3 }, settings);
  assert.equal(gone.status, 'failed');
  assert.equal(gone.disable, 'gone');
  const waits = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
  waits.forEach((wait, i) => {
    const low = outcomeOf(i + 1, { status: 500, durationMs: 3 }, settings, () => 0);
    const high = outcomeOf(i + 1, { status: 500, durationMs: 3 }, settings, () => 1);
    assert.equal(low.status, 'pending');
    assert.equal(low.retryInMs, Math.round(wait * 0.8), `after attempt ${i + 1}`);
    assert.equal(high.retryInMs, Math.round(wait * 1.2));
    assert.equal(low.lastError, 'the receiver answered 500');
    assert.equal(low.healthy, false);
  });
  const last = outcomeOf(8, { error: 'timeout after 10000 ms', durationMs: 10_000 }, settings);
  assert.equal(last.status, 'failed', 'the eighth attempt was the last');
  assert.equal(last.lastError, 'timeout after 10000 ms');
  const redirect = outcomeOf(1, { status: 302, durationMs: 3 }, settings, () => 0.5);
  assert.equal(redirect.status, 'pending', 'a redirect is not followed: it is a failure');
  const cut = outcomeOf(1, { status: 200, error: 'timeout after 10000 ms', durationMs: 10_000 }, settings, () => 0.5);
  assert.equal(cut.status, 'pending', 'a 200 whose body outlived the deadline is not delivered');
});

test('WEBHOOK_RETRY_SCHEDULE: durations, zero allowed, 1 to 20 of them', () => {
  assert.deepEqual(parseRetrySchedule('0s,200ms,1s'), [0, 200, 1000]);
  assert.deepEqual(
    parseRetrySchedule(DEFAULT_RETRY_SCHEDULE),
    [0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
  );
  for (const bad of ['', '1s,,2s', 'soon', '-1s', Array(21).fill('1s').join(',')]) {
    assert.throws(() => parseRetrySchedule(bad), /WEBHOOK_RETRY_SCHEDULE/, bad);
  }
});

test('Retry-After on a 429 or 503: seconds or an HTTP date, at least the schedule’s wait, at most 24 h', () => {
  const now = Date.UTC(2026, 0, 1, 12);
  const at = (header: string, status = 429, attempt = 1) =>
    outcomeOf(attempt, { status, durationMs: 3, retryAfter: header }, settings, () => 0.5, { now });
  assert.equal(at('120').retryInMs, 120_000);
  assert.equal(at(new Date(now + 3_600_000).toUTCString(), 503).retryInMs, 3_600_000);
  assert.equal(at('3').retryInMs, 5_000, 'shorter than the schedule’s 5 s: the schedule’s');
  assert.equal(at('999999').retryInMs, 86_400_000, 'capped at 24 h');
  assert.equal(at(new Date(now - 60_000).toUTCString()).retryInMs, 5_000, 'a date past: the schedule’s');
  assert.equal(at('soon').retryInMs, 5_000, 'unreadable: ignored');
  assert.equal(at('120', 500).retryInMs, 5_000, 'only on 429 and 503');
  const last = at('120', 429, 8);
  assert.deepEqual(
    [last.status, last.retryInMs],
    ['failed', null],
    'the schedule’s last attempt: failed, not extended',
  );
  const ping = outcomeOf(1, { status: 500, durationMs: 3 }, settings, () => 0.5, { now, retries: false });
  assert.equal(ping.status, 'failed', 'a ping is attempted once');
  assert.equal(retryAfterMs('Wed, 21 Oct 2026 07:28:00 GMT', Date.parse('2026-10-21T07:27:00Z')), 60_000);
  assert.equal(retryAfterMs(' 7 ', now), 7_000);
  assert.equal(retryAfterMs('-5', now), undefined);
});

test('Retry-After is read in the two forms RFC 9110 defines, and only those', () => {
  const now = Date.parse('2026-10-21T07:27:00Z');
  assert.equal(retryAfterMs('120', now), 120_000, 'delay-seconds');
  assert.equal(retryAfterMs('Wed, 21 Oct 2026 07:28:00 GMT', now), 60_000, 'an IMF-fixdate');
  for (const lenient of [
    'May 2099', // Date.parse read it as 1 May 2099: a wait of 24 h
    '2026-10-21T09:27:00Z', // ISO 8601: about 2 h
    '2026-10-21',
    'Wednesday, 21-Oct-26 07:28:00 GMT', // RFC 850, obsolete
    'Wed Oct 21 07:28:00 2026', // asctime, obsolete
    'wed, 21 oct 2026 07:28:00 gmt',
    'Wed, 21 Oct 2026 07:28:00 +0000',
    'Thu, 21 Oct 2026 07:28:00 GMT', // the wrong weekday
    'Sat, 31 Feb 2026 07:28:00 GMT', // no such day
    '1.5',
    '',
  ]) {
    assert.equal(retryAfterMs(lenient, now), undefined, lenient);
  }
});

test('signDelivery with two secrets: one signature each, the first secret’s first, space-separated', () => {
  const headers = signDelivery(['whsec_AAAA', 'whsec_BBBB'], 'evt_1', 1_700_000_000, '{}');
  const one = signDelivery('whsec_AAAA', 'evt_1', 1_700_000_000, '{}');
  const two = signDelivery('whsec_BBBB', 'evt_1', 1_700_000_000, '{}');
  assert.equal(headers['webhook-signature'], `${one['webhook-signature']} ${two['webhook-signature']}`);
});
