import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseJson } from '../../src/portal/json.js';
import {
  ago,
  failingSince,
  fromNow,
  localTime,
  recoveredWords,
  requeuedWords,
  statusWords,
} from '../../src/portal/words.js';

// The portal's words for times and states ("in words, not codes"), and its
// JSON reading, which keeps int64 ids exact.

const NOW = Date.parse('2026-03-03T19:02:11Z');
const before = (ms: number): string => new Date(NOW - ms).toISOString();

describe('words', () => {
  test('failingSince: the local time, then how long ago in hours', () => {
    const since = before(5 * 3_600_000 + 60_000);
    assert.equal(failingSince(since, NOW), `failing since ${localTime(since)} (5 hours ago)`);
    assert.equal(ago(before(3_600_000), NOW), '1 hour ago');
    assert.equal(ago(before(12 * 60_000), NOW), '12 minutes ago');
    assert.equal(ago(before(20_000), NOW), 'just now');
    assert.equal(ago(before(4 * 86_400_000), NOW), '4 days ago');
  });

  test('disabledReason in words', () => {
    assert.equal(statusWords('active', null), 'active');
    assert.equal(statusWords('disabled', 'gone'), 'disabled: the receiver answered 410 Gone');
    assert.equal(statusWords('disabled', 'failing'), 'disabled after 5 days of failed deliveries');
    assert.equal(statusWords('disabled', 'manual'), 'disabled by you');
  });

  test('the next attempt, and what a recover put back', () => {
    assert.equal(fromNow(new Date(NOW + 4200).toISOString(), NOW), 'in 5 seconds');
    assert.equal(fromNow(new Date(NOW + 30 * 60_000).toISOString(), NOW), 'in 30 minutes');
    assert.equal(fromNow(before(1000), NOW), 'now');
    assert.equal(requeuedWords(1), '1 failed delivery is pending again.');
    assert.equal(requeuedWords(3), '3 failed deliveries are pending again.');
    assert.equal(requeuedWords(0), 'No failed delivery since then: nothing to send again.');
    // Interface 1.3.0: a recover also sends the events of a pause.
    assert.equal(recoveredWords({ requeued: 2, created: 0 }), '2 failed deliveries are pending again.');
    assert.equal(recoveredWords({ requeued: 0, created: 1 }), '1 event of the pause is sent.');
    assert.equal(
      recoveredWords({ requeued: 1, created: 3 }),
      '3 events of the pause are sent, and 1 failed delivery is pending again.',
    );
  });
});

describe('parseJson', () => {
  test('keeps integers beyond 2^53 exact, as their text, and leaves strings and small numbers alone', () => {
    assert.deepEqual(
      parseJson(
        '[{"id":9007199254740993,"eventId": -9223372036854775808 ,"attempts":2,"lastError":"id 12345678901234567 \\" x"}]',
      ),
      [{ id: '9007199254740993', eventId: '-9223372036854775808', attempts: 2, lastError: 'id 12345678901234567 " x' }],
    );
    assert.deepEqual(parseJson('{"requeued":0}'), { requeued: 0 });
  });
});
