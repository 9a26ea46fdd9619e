import assert from 'node:assert/strict';
import { type TestContext, describe, test } from 'node:test';
import { tokenId } from '../../src/auth/token.js';
import type { Config } from '../../src/config.js';
import { READ_WRITE, type TestApp, makeApp, openTestStore } from '../helpers.js';
import { listen } from '../http/support.js';
import { create, plantBody } from '../plants/plant.helpers.js';
import { Gate, RawStream, eventually, gatedStore } from './stream-support.js';

// Streams that end with their token and outlive a deploy (docs/api.md#the-change-feed): the limit
// of 5 streams per token under a burst, a client that leaves during setup, a stream set up while
// the streams are being ended, and a stream whose token is revoked or expires. Run on SQLite here
// and on PostgreSQL through test/postgres/events.test.ts.

interface Served {
  readonly h: TestApp;
  readonly port: number;
  readonly gate: Gate;
  readonly streams: RawStream[];
  open(token: string, headers?: Record<string, string>): RawStream;
}

async function served(t: TestContext, overrides: Partial<Config> = {}): Promise<Served> {
  const gate = new Gate();
  const h = await makeApp(overrides, gatedStore(await openTestStore(), gate));
  const streams: RawStream[] = [];
  t.after(async () => {
    gate.open();
    for (const stream of streams) stream.destroy();
    await h.close();
  });
  const port = await listen(h);
  return {
    h,
    port,
    gate,
    streams,
    open: (token, headers) => {
      const stream = new RawStream(port, token, headers);
      streams.push(stream);
      return stream;
    },
  };
}

const connections = (h: TestApp): Promise<number> =>
  new Promise((resolve, reject) => h.app.server.getConnections((error, n) => (error ? reject(error) : resolve(n))));

/** Until the stream has been set up: a 200, and its first comment. */
async function connected(stream: RawStream): Promise<void> {
  await eventually('the stream is answered', () => stream.status !== undefined);
  assert.equal(stream.status, 200, `the stream opens (answered ${stream.status})`);
  await eventually('the stream is set up', () => stream.text.includes(': connected'));
}

function assertOpenStream(stream: RawStream): void {
  assert.equal(stream.status, 200);
  assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
  assert.equal(stream.ended, false);
}

describe('GET /events: the limit of 5 streams per token', () => {
  for (const gated of [true, false]) {
    test(`40 stream requests of one token at the same instant: 5 get 200, 35 get 429${gated ? ' (setup held until all arrived)' : ''}`, async (t) => {
      const s = await served(t);
      const alice = await s.h.token('alice', READ_WRITE);
      // Held: the handler of every request that gets a place waits on the database until all 40
      // are in, the window a burst on PostgreSQL opens by itself.
      if (gated) s.gate.close();
      const burst = Array.from({ length: 40 }, () => s.open(alice));
      const refused = (): number => burst.filter((b) => b.status === 429).length;
      if (gated) {
        await eventually('every request in setup or refused', () => s.gate.held + refused() >= 40);
        s.gate.open();
      }
      await eventually('every request answered', () => burst.every((b) => b.status !== undefined));
      const opened = burst.filter((b) => b.status === 200);
      assert.equal(opened.length, 5, `statuses: ${burst.map((b) => b.status).join(' ')}`);
      assert.equal(refused(), 35);
      for (const stream of opened) await connected(stream);
      assert.equal(s.h.app.eventStreams.streams.size, 5);
      // A place freed is a place taken again.
      opened[0]!.destroy();
      await eventually('one stream fewer', () => s.h.app.eventStreams.streams.size === 4);
      const again = s.open(alice);
      await connected(again);
      assertOpenStream(again);
    });
  }

  test('clients that leave while their streams are being set up free their places at once; the tail keeps none of them', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    s.gate.close();
    const leaving = Array.from({ length: 5 }, () => s.open(alice));
    await eventually('five streams in setup', () => s.gate.held === 5);
    for (const stream of leaving) stream.destroy();
    await eventually('the server saw them go', async () => (await connections(s.h)) === 0);
    s.gate.open();
    const staying = Array.from({ length: 5 }, () => s.open(alice));
    for (const stream of staying) {
      await connected(stream);
      assertOpenStream(stream);
    }
    assert.equal(s.h.app.eventStreams.streams.size, 5);
    await eventually('the tail feeds the 5 open streams', () => s.h.app.eventStreams.subscribers === 5);
    for (const stream of staying) stream.destroy();
    await eventually('no stream left', () => s.h.app.eventStreams.streams.size === 0);
    await eventually('no subscriber left on the tail', () => s.h.app.eventStreams.subscribers === 0);
    assert.equal(s.gate.held, 0);
  });
});

describe('GET /events while the streams are being ended (a shutdown)', () => {
  test('a stream still being set up when the streams end gets 200 with retry: and ends; a new one too, never 503', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const open = s.open(alice);
    await connected(open);
    s.gate.close();
    const settingUp = s.open(alice);
    await eventually('a stream in setup', () => s.gate.held === 1);
    s.h.app.eventStreams.endAll(); // what the server does once no new connection can reach it
    await eventually('the open stream ends', () => open.ended);
    const arriving = s.open(alice);
    s.gate.open();
    for (const stream of [settingUp, arriving]) {
      await eventually('the answer ends', () => stream.ended, 5000);
      assert.equal(stream.status, 200, stream.text);
      assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
      assert.match(stream.text, /^retry: [0-9]+$/m, 'a reconnection time: the client comes back');
    }
    assert.match(open.text, /^retry: [0-9]+$/m);
    assert.equal(s.h.app.eventStreams.streams.size, 0);
    assert.equal(s.h.app.eventStreams.subscribers, 0);
  });
});

describe('GET /events ends a stream with its token', () => {
  test('a stream whose token is revoked ends (within seconds); reconnecting gets 401; other tokens’ streams go on', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const other = await s.h.token('alice', READ_WRITE);
    const [doomed, kept] = [s.open(alice), s.open(other)];
    for (const stream of [doomed, kept]) await connected(stream);
    assert.equal((await create(s.h, alice, plantBody('1', 'fern'))).statusCode, 200);
    await eventually('the event on the stream', () => doomed.text.includes('event: plant.created'));
    assert.equal(await s.h.tokens.revoke(tokenId(alice)!), true);
    s.h.advance(2000); // past the token cache's life (the documented 2 s)
    await eventually('the stream of the revoked token ends', () => doomed.ended, 10_000);
    assert.match(doomed.text, /revoked or has expired/);
    const again = s.open(alice);
    await eventually('the reconnect is answered', () => again.ended);
    assert.equal(again.status, 401);
    assert.match(String(again.headers['www-authenticate']), /error="invalid_token"/);
    assert.equal(kept.ended, false, 'another token’s stream stays open');
    assert.equal(s.h.app.eventStreams.streams.size, 1);
  });

  test('a stream whose token expires ends; reconnecting gets 401', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE, 60_000);
    const stream = s.open(alice);
    await connected(stream);
    s.h.advance(60_000); // the app's clock reaches the token's expiry
    await eventually('the stream of the expired token ends', () => stream.ended, 10_000);
    const again = s.open(alice);
    await eventually('the reconnect is answered', () => again.ended);
    assert.equal(again.status, 401);
    assert.equal(s.h.app.eventStreams.streams.size, 0);
  });
});
