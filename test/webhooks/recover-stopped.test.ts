import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import { testConfig } from '../../src/config.js';
import { type Store, StoreUnavailableError } from '../../src/store/store.js';
import type { RecoverOptions } from '../../src/store/webhook-store.js';
import { type TestApp, json, makeApp, openTestStore } from '../helpers.js';
import { plantBody } from '../plants/plant.helpers.js';

// POST /webhooks/{id}/recover is done by the store in parts, each committed on its own: one that
// stops after some of them answers what they did and that calling it again finishes the work, and
// a long one is logged as it goes. Both engines (test/postgres/webhooks.test.ts runs this folder
// again there).

const SCOPES = ['plants:write', 'webhooks:read', 'webhooks:write'];

interface Harness {
  readonly h: TestApp;
  readonly log: Array<Record<string, unknown>>;
  readonly token: string;
  readonly id: string;
  readonly parts: PartsControl;
}

interface PartsControl {
  /** Thrown after the recover's third part committed, once; none when undefined. */
  failure: Error | undefined;
  /** How far the app's clock moves after each part. */
  stepMs: number;
  advance(ms: number): void;
}

/**
 * An app whose store recovers in parts of 2 rows, the app's clock moved after each part (a long
 * recover, without waiting for one); alice's paused webhook missed 10 events.
 */
async function pausedWebhook(t: TestContext): Promise<Harness> {
  const store = await openTestStore();
  const parts: PartsControl = { failure: undefined, stepMs: 6000, advance: () => {} };
  const recoverDeliveries: Store['recoverDeliveries'] = (id, owner, since, options: RecoverOptions = {}) => {
    let done = 0;
    return store.recoverDeliveries(id, owner, since, {
      partRows: 2,
      onProgress: (so) => {
        parts.advance(parts.stepMs);
        options.onProgress?.(so);
        const failure = parts.failure;
        if (++done === 3 && failure !== undefined) {
          parts.failure = undefined;
          throw failure;
        }
      },
    });
  };
  const inParts = new Proxy(store, {
    get: (target, key) => {
      if (key === 'recoverDeliveries') return recoverDeliveries;
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  const log: Array<Record<string, unknown>> = [];
  const logStream = {
    write: (text: string) => {
      for (const line of text.split('\n')) if (line !== '') log.push(JSON.parse(line) as Record<string, unknown>);
    },
  };
  const h = await makeApp(
    { logLevel: 'info', events: { ...testConfig().events, allowPrivateTargets: true } },
    inParts,
    logStream,
  );
  t.after(() => h.close());
  parts.advance = (ms) => h.advance(ms);
  const token = await h.token('alice', SCOPES);
  const added = await h.call(token, {
    method: 'POST',
    url: '/webhooks',
    ...json(JSON.stringify({ url: 'http://127.0.0.1:9/hooks' })),
  });
  assert.equal(added.statusCode, 201, added.payload);
  const { id } = JSON.parse(added.payload) as { id: string };
  const paused = await h.call(token, { method: 'PATCH', url: `/webhooks/${id}`, ...json('{"status":"disabled"}') });
  assert.equal(paused.statusCode, 200, paused.payload);
  for (let i = 1; i <= 10; i++) {
    const res = await h.call(token, { method: 'POST', url: '/plants', ...json(plantBody(String(i), `plant ${i}`)) });
    assert.equal(res.statusCode, 200, res.payload);
  }
  return { h, log, token, id, parts };
}

const recover = (x: Harness) =>
  x.h.call(x.token, { method: 'POST', url: `/webhooks/${x.id}/recover`, ...json('{"since":"1970-01-01T00:00:00Z"}') });

test('a recover that fails after parts committed answers 500 with what they did; called again it finishes', async (t) => {
  const x = await pausedWebhook(t);
  // Its parts: the deliveries (none), then the events two at a time: the third part's report fails.
  x.parts.failure = new Error('an injected failure');
  const stopped = await recover(x);
  assert.equal(stopped.statusCode, 500, stopped.payload);
  assert.deepEqual(JSON.parse(stopped.payload), {
    error: 500,
    message:
      'recover stopped after requeuing 0 and creating 4 deliveries: an unexpected error (logged); ' +
      'call it again to finish (it continues where it stopped)',
  });
  const line = x.log.find((l) => l.msg === 'recover stopped');
  assert.equal(line?.level, 50);
  assert.deepEqual([line?.webhookId, line?.requeued, line?.created], [x.id, 0, 4]);
  assert.match(String((line?.err as { message?: string } | undefined)?.message), /an injected failure/);
  assert.ok(!stopped.payload.includes('injected'), 'the cause is logged, not answered');

  const again = await recover(x);
  assert.equal(again.statusCode, 202, again.payload);
  assert.deepEqual(JSON.parse(again.payload), { requeued: 0, created: 6 });
});

test('a recover stopped by an unavailable database answers 503 with Retry-After and what was done', async (t) => {
  const x = await pausedWebhook(t);
  x.parts.failure = new StoreUnavailableError('connect ECONNREFUSED 10.1.2.3:5432');
  const stopped = await recover(x);
  assert.equal(stopped.statusCode, 503, stopped.payload);
  assert.equal(stopped.headers['retry-after'], '2');
  assert.deepEqual(JSON.parse(stopped.payload), {
    error: 503,
    message:
      'recover stopped after requeuing 0 and creating 4 deliveries: the database is unavailable; ' +
      'call it again to finish (it continues where it stopped)',
  });
  assert.ok(!stopped.payload.includes('10.1.2.3'), 'the database’s own words stay in the log');
  const line = x.log.find((l) => l.msg === 'recover stopped');
  assert.deepEqual([line?.level, line?.reason], [40, 'connect ECONNREFUSED 10.1.2.3:5432']);
  assert.deepEqual(JSON.parse((await recover(x)).payload), { requeued: 0, created: 6 });
});

test('a long recover is logged as it goes, at most every 5 s, and at its end with its totals', async (t) => {
  const x = await pausedWebhook(t);
  x.parts.stepMs = 2000;
  const done = await recover(x);
  assert.deepEqual(JSON.parse(done.payload), { requeued: 0, created: 10 });
  // A report after each of its 7 parts, 2 s apart on the app's clock: one line every third.
  const going = x.log.filter((l) => l.msg === 'recover under way');
  assert.equal(going.length, 2, JSON.stringify(going));
  assert.ok(going.every((l) => l.level === 30 && l.webhookId === x.id && l.requeued === 0));
  assert.deepEqual(
    going.map((l) => [l.elapsedMs, l.created]),
    [
      [6000, 4],
      [12000, 10],
    ],
    'the totals so far',
  );
  const end = x.log.filter((l) => l.msg === 'recover done');
  assert.deepEqual(
    end.map((l) => [l.level, l.webhookId, l.requeued, l.created, l.durationMs]),
    [[30, x.id, 0, 10, 14000]],
  );
});
