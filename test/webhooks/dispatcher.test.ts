import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import type { EventSettings } from '../../src/config.js';
import { type Store } from '../../src/store/store.js';
import { FAN_OUT_BATCH } from '../../src/store/event-store.js';
import type { ClaimRequest } from '../../src/store/webhook-store.js';
import type { ApiPressure } from '../../src/webhooks/api-pressure.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import type { SecretBox } from '../../src/webhooks/secret-box.js';
import type { WebhookSender } from '../../src/webhooks/sender.js';

// How the dispatcher looks for work while the API saturates its process, against a store that
// records each claim and has nothing due. Timers are mocked, and the dispatcher's clock is the
// test's: no assertion depends on how fast this machine is.

const settings = {
  retrySchedule: [0, 5000],
  disableAfterFailingMs: 5 * 86_400_000,
  leaseMs: 30_000,
  maxInFlight: 64,
  maxInFlightPerWebhook: 32,
} as unknown as EventSettings;
const log = { warn() {}, info() {} } as unknown as FastifyBaseLogger;

/** Lets the dispatcher's awaited store calls settle (microtasks and I/O callbacks only: no timer runs). */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function harness(saturated: boolean) {
  const claims: Array<{ limit: number; fanOut: number }> = [];
  const store = {
    watchEvents: () => () => {},
    claimDeliveries: ({ limit, fanOut }: ClaimRequest) => {
      claims.push({ limit, fanOut: fanOut! });
      return Promise.resolve([]);
    },
    nextDueInMs: () => Promise.resolve(null),
    releaseLeases: () => Promise.resolve(),
  } as unknown as Store;
  const pressure = { saturated } as ApiPressure;
  let now = 1_000_000;
  const dispatcher = new Dispatcher(store, {} as WebhookSender, {} as SecretBox, settings, log, pressure, () => now);
  return { dispatcher, claims, advance: (ms: number) => (now += ms) };
}

test('under pressure, a look at most every 50 ms whatever wakes it, for at most 8 deliveries', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  const { dispatcher, claims, advance } = harness(true);
  dispatcher.start();
  await settle();
  assert.deepEqual(claims, [{ limit: 8, fanOut: 8 }], 'the first look: 8 in flight, 8 events fanned out');

  advance(10);
  for (let i = 0; i < 20; i++) dispatcher.wake(); // commits and ended sends, 10 ms later
  await settle();
  assert.equal(claims.length, 1, 'no second look within 50 ms of the first');

  advance(40);
  mock.timers.tick(39);
  await settle();
  assert.equal(claims.length, 1, 'the put-off look waits for its timer');
  mock.timers.tick(1);
  await settle();
  assert.equal(claims.length, 2, 'one look, 50 ms after the first, for all those wakes');

  await dispatcher.drain();
});

test('without pressure, every wake looks at once, for the full batch', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  const { dispatcher, claims, advance } = harness(false);
  dispatcher.start();
  await settle();
  advance(1);
  dispatcher.wake();
  await settle();
  advance(1);
  dispatcher.wake();
  await settle();
  assert.deepEqual(claims, [
    { limit: 64, fanOut: FAN_OUT_BATCH },
    { limit: 64, fanOut: FAN_OUT_BATCH },
    { limit: 64, fanOut: FAN_OUT_BATCH },
  ]);
  await dispatcher.drain();
});
