import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type ServerResponse, createServer, get } from 'node:http';
import { type AddressInfo, type Socket, connect } from 'node:net';
import { type TestContext, test } from 'node:test';
import { testConfig } from '../../src/config.js';
import { EventStream } from '../../src/events/event-stream.js';
import type { EventRecord, EventStore } from '../../src/store/event-store.js';
import { READ_WRITE, type TestApp, makeApp } from '../helpers.js';
import { listen } from '../http/support.js';
import { create, plantBody } from '../plants/plant.helpers.js';
import { eventually } from './stream-support.js';

// GET /events byte for byte, over plain sockets: each event (and each heartbeat) is written to a
// stream's socket as one chunk of the chunked HTTP/1.1 body, the same bytes for every stream
// (event-stream.ts); an HTTP/1.0 client, which knows no chunks, gets the messages bare
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

// What the frames written straight to the socket rely on in Node (event-stream.ts): a head that
// declares `transfer-encoding: chunked` itself gets that header once, and no bytes of Node's own
// between the head and end(); end() then sends its text as a chunk and closes the body with the
// last chunk (RFC 9112 §7.1). A Node that changed any of these would fail here, not in a browser.
test('GET /events over HTTP/1.1 is one chunked body to its end: the frames, then end()’s chunk and the last chunk', async (t) => {
  const { h, port, token, close } = await served(t);
  const stream = new WireStream(port, token, '1.1');
  t.after(() => stream.destroy());
  await eventually('the stream is set up', () => stream.body.includes(': connected'));
  assert.equal(stream.head.match(/\r\ntransfer-encoding:/gi)?.length, 1, stream.head);
  assert.equal((await create(h, token, plantBody('9', 'Ivy'))).statusCode, 200);
  const [event] = await h.store.readEvents(0n, null, 10);
  const message = `id: ${event!.id}\nevent: plant.created\ndata: {"id":9,"name":"Ivy"}\n\n`;
  await eventually('the event', () => stream.body.endsWith(chunk(message)));
  await close();
  await eventually('the connection ends', () => stream.closed);
  const connected = /^: connected\nretry: \d+\n\n/.exec(stream.body.slice(stream.body.indexOf('\r\n') + 2))![0];
  assert.equal(
    stream.body,
    chunk(connected) +
      chunk(message) +
      chunk(': the server is restarting; reconnect to resume the feed\n\n') +
      '0\r\n\r\n',
  );
});

test('a chunked stream is ended once more than 4 MiB wait in its socket: a reader that slow resumes later', async (t) => {
  const server = createServer((_request, response) => void server.emit('stream', response));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const answered = once(server, 'stream');
  const request = get({ port: (server.address() as AddressInfo).port, host: '127.0.0.1' });
  request.on('error', () => {});
  const [response] = (await answered) as [ServerResponse];
  response.writeHead(200, { 'transfer-encoding': 'chunked' }).flushHeaders();
  let ended = false;
  const store = { readEvents: () => Promise.resolve([]) } as unknown as EventStore;
  const stream = new EventStream(response, store, null, 0n, () => (ended = true), null, true);
  await stream.catchUp();
  const event = (id: bigint, bytes: number): EventRecord => ({
    id,
    type: 'plant.created',
    owner: 'alice',
    payload: 'x'.repeat(bytes),
    createdAt: 0,
  });
  response.socket!.cork(); // what a reader that stopped reading leaves queued, kernel buffers full
  stream.offer(event(1n, 3 * 1024 * 1024));
  assert.equal(ended, false, '3 MiB waiting: the stream goes on');
  stream.offer(event(2n, 2 * 1024 * 1024));
  assert.equal(ended, true, '5 MiB waiting: the stream is ended');
  request.destroy();
});
