import assert from 'node:assert/strict';
import { type Socket, connect } from 'node:net';
import { type TestContext, test } from 'node:test';
import { testConfig } from '../../src/config.js';
import { READ_WRITE, type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import { create, plantBody } from '../plants/plant.helpers.js';
import { eventually } from './stream-support.js';

// GET /events byte for byte, over plain sockets: each event (and each heartbeat) is written to a
// stream's socket as one chunk of the chunked HTTP/1.1 body, the same bytes for every stream
// (event-stream.ts, issue 36); an HTTP/1.0 client, which knows no chunks, gets the messages bare
// and the end of the connection as the end of the body.

/** A GET /events on a socket of its own; `bytes` is everything the server sent, as latin1. */
class WireStream {
  bytes = '';
  closed = false;
  private readonly socket: Socket;

  constructor(port: number, token: string, version: '1.0' | '1.1') {
    this.socket = connect({ port, host: '127.0.0.1' });
    this.socket.on('data', (chunk: Buffer) => void (this.bytes += chunk.toString('latin1')));
    this.socket.on('close', () => void (this.closed = true));
    this.socket.on('error', () => {});
    this.socket.write(
      `GET /events HTTP/${version}\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\n` +
        `authorization: Bearer ${token}\r\n\r\n`,
    );
  }

  get head(): string {
    return this.bytes.slice(0, this.bytes.indexOf('\r\n\r\n') + 4);
  }

  get body(): string {
    return this.bytes.slice(this.head.length);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

interface Served {
  readonly h: TestApp;
  readonly port: number;
  readonly token: string;
  /** Closes the app once, whoever asks first (a test, or its after hook). */
  readonly close: () => Promise<void>;
}

async function served(t: TestContext, heartbeatMs?: number): Promise<Served> {
  const h = await makeApp(heartbeatMs === undefined ? {} : { events: { ...testConfig().events, heartbeatMs } });
  const port = await listen(h);
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => (closed ??= h.close());
  t.after(close);
  return { h, port, token: await h.token('alice', READ_WRITE), close };
}

/** `text` as one chunk of a chunked body (RFC 9112 §7.1): its size in hex, CRLF, its bytes, CRLF. */
const chunk = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

test('GET /events over HTTP/1.1 writes each event as one whole chunk, the same bytes on every stream', async (t) => {
  const { h, port, token } = await served(t);
  const streams = [new WireStream(port, token, '1.1'), new WireStream(port, token, '1.1')];
  t.after(() => streams.forEach((s) => s.destroy()));
  for (const s of streams) await eventually('the stream is set up', () => s.body.includes(': connected'));
  const before = streams.map((s) => s.body.length);
  assert.equal((await create(h, token, plantBody('7', 'Fern – 🌿'))).statusCode, 200);
  const [event] = await h.store.readEvents(0n, null, 10);
  const message = `id: ${event!.id}\nevent: plant.created\ndata: {"id":7,"name":"Fern – 🌿"}\n\n`;
  const expected = Buffer.from(chunk(message)).toString('latin1'); // the size counts bytes, not characters
  for (const [i, s] of streams.entries()) {
    assert.match(s.head, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(s.head, /\r\ntransfer-encoding: chunked\r\n/i);
    await eventually('the event', () => s.body.length >= before[i]! + expected.length);
    assert.equal(s.body.slice(before[i]), expected);
  }
});

test('GET /events over HTTP/1.1 sends each heartbeat as one chunk too', async (t) => {
  const { port, token } = await served(t, 100);
  const stream = new WireStream(port, token, '1.1');
  t.after(() => stream.destroy());
  const beat = chunk(': keep-alive\n\n');
  await eventually('two heartbeats', () => stream.body.split(beat).length >= 3);
  assert.match(stream.body, /^(?:[0-9a-f]+\r\n:[^\r]*\r\n)+$/, 'nothing but whole chunks of comments and retry:');
});

test('GET /events over HTTP/1.0 sends the same messages without chunks, and ends with the connection', async (t) => {
  const { h, port, token, close } = await served(t);
  const stream = new WireStream(port, token, '1.0');
  t.after(() => stream.destroy());
  await eventually('the stream is set up', () => stream.body.includes(': connected'));
  assert.match(stream.head, /^HTTP\/1\.1 200 OK\r\n/);
  assert.doesNotMatch(stream.head, /transfer-encoding/i);
  assert.equal((await create(h, token, plantBody('8', 'Moss'))).statusCode, 200);
  const [event] = await h.store.readEvents(0n, null, 10);
  const message = `id: ${event!.id}\nevent: plant.created\ndata: {"id":8,"name":"Moss"}\n\n`;
  await eventually('the event', () => stream.body.endsWith(message));
  assert.match(stream.body, /^: connected\nretry: \d+\n\nid: /);
  await close();
  await eventually('the connection ends', () => stream.closed);
  assert.ok(stream.body.endsWith(': the server is restarting; reconnect to resume the feed\n\n'), stream.body);
});
