import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { userDocs } from './markdown.js';
import { loadConfig } from '../../src/config.js';
import { outcomeOf } from '../../src/webhooks/outcome.js';

// How long the default retry schedule lasts was "about 32 hours" in events.md
// and "about 28 h" elsewhere. The figure is computed here from the schedule itself, as the sender
// applies it (outcomeOf, ±20 % jitter), and every doc that states it states that figure.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DOCS = [...userDocs(ROOT), 'SECURITY.md'];
const HOUR = 3_600_000;

/** From the first attempt to the last of a delivery that fails every one, with `random` as the jitter's draw. */
function span(random: number): number {
  const settings = loadConfig({}).events;
  let total = 0;
  for (let attempt = 1; ; attempt++) {
    const outcome = outcomeOf(attempt, { status: 500, durationMs: 1 }, settings, () => random);
    if (outcome.status === 'failed') return total;
    total += outcome.retryInMs ?? 0;
  }
}

const typical = Math.round(span(0.5) / HOUR);
const longest = Math.round(span(1) / HOUR);

test('the default schedule spans about 28 h, 33 h at most with jitter', () => {
  // 5 s + 5 min + 30 min + 2 h + 5 h + 10 h + 10 h = 27 h 35 min 5 s between the first and the eighth attempt.
  assert.equal(span(0.5), ((27 * 60 + 35) * 60 + 5) * 1000);
  assert.equal(typical, 28);
  assert.equal(longest, 33); // × 1.2
});

test("every doc that states the schedule's span states the same figures", () => {
  const stated: string[] = [];
  const wrong: string[] = [];
  for (const doc of DOCS) {
    const text = readFileSync(join(ROOT, doc), 'utf8').replace(/\s+/g, ' ');
    for (const m of text.matchAll(/\babout (\d+(?:\.\d+)?) ?(?:h|hours?)\b/g)) {
      stated.push(doc);
      if (Number(m[1]) !== typical) wrong.push(`${doc}: "${m[0]}", not about ${typical} h`);
    }
    for (const m of text.matchAll(/\b(\d+(?:\.\d+)?) ?(?:h|hours?),? (?:at most )?with (?:the )?(?:±20 % )?jitter/g)) {
      if (Number(m[1]) !== longest) wrong.push(`${doc}: "${m[0]}", not ${longest} h with jitter`);
    }
  }
  assert.deepEqual(wrong, []);
  for (const doc of ['docs/events.md', 'docs/operations.md', 'docs/monitoring.md']) {
    assert.ok(stated.includes(doc), `${doc} states how long the schedule lasts`);
  }
});
