import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { READ_WRITE, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';

// The change feed's catch-up follows the socket: a client resuming far behind, reading as fast as
// it can, receives the whole backlog on one connection, even where the store answers at once
// (SQLite), and the stream then goes on live. The backlog here is over 4 MiB, the bound at which a
// stream whose client does not keep up is ended: read in one go, it would be ended part way.

const EVENTS = 30_000;
const NAME = 'n'.repeat(100); // about 150 bytes an event: 4.5 MB in all

test(`a client resuming ${EVENTS.toLocaleString('en')} events behind receives them all on one connection, then live events`, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  for (let from = 1; from <= EVENTS; from += 1000) {
    await Promise.all(
      Array.from({ length: 1000 }, (_, i) =>
        h.store.createPlant({ id: BigInt(from + i), owner: 'alice', name: NAME, tag: null }),
      ),
    );
  }
  const port = await listen(h);
  const token = await h.token('alice', READ_WRITE);

  const socket = connect({ port, host: '127.0.0.1' });
  t.after(() => socket.destroy());
  let text = '';
  let closed = false;
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => void (text += chunk));
  socket.on('close', () => void (closed = true));
  socket.write(
    `GET /events?after=0 HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\nauthorization: Bearer ${token}\r\n\r\n`,
  );
  const ids = (): number => (text.match(/\nid: \d+\n/g) ?? []).length;
  const deadline = Date.now() + 120_000; // a deadline on the condition, not a speed
  while (ids() < EVENTS && !closed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(closed, false, `the stream was ended after ${ids()} of ${EVENTS} events: ${text.slice(-200)}`);
  assert.equal(ids(), EVENTS, 'every event of the backlog');
  const received = [...text.matchAll(/\nid: (\d+)\n/g)].map((m) => Number(m[1]));
  assert.ok(
    received.every((id, i) => i === 0 || id > received[i - 1]!),
    'in id order, each once',
  );

  assert.equal(
    (
      await h.call(token, {
        method: 'POST',
        url: '/plants',
        payload: { id: EVENTS + 1, name: 'live' },
      })
    ).statusCode,
    200,
  );
  while (!text.includes('"name":"live"') && !closed && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(text.includes(`"id":${EVENTS + 1},"name":"live"`), 'the live event after the backlog');
  assert.equal(closed, false);
  t.diagnostic(`${(Buffer.byteLength(text, 'latin1') / 1e6).toFixed(1)} MB received on one connection`);
});
