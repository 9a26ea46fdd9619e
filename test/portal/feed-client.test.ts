import assert from 'node:assert/strict';
import { once } from 'node:events';
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import { FeedClient, type FeedState } from '../../src/portal/feed-client.js';
import { EventStreamParser, type StreamEvent } from '../../src/portal/sse.js';
import { eventually } from '../support/eventually.js';

// The portal's live feed: a text/event-stream parser for a stream read with
// fetch, and the client that reconnects after the server's `retry:` with Last-Event-ID. Pure
// modules of src/portal/, run here under Node against a server that scripts each connection.

function parse(...pieces: string[]): { events: StreamEvent[]; parser: EventStreamParser } {
  const events: StreamEvent[] = [];
  const parser = new EventStreamParser((event) => events.push(event));
  for (const piece of pieces) parser.push(piece);
  return { events, parser };
}

describe('EventStreamParser', () => {
  test('dispatches id, event and data at each blank line; comments are skipped', () => {
    const { events, parser } = parse(
      ': connected\nretry: 1500\n\nid: 1\nevent: plant.created\ndata: {"id":9007199254740993,"name":"Monstera"}\n\n',
    );
    assert.deepEqual(events, [{ id: '1', type: 'plant.created', data: '{"id":9007199254740993,"name":"Monstera"}' }]);
    assert.equal(parser.retryMs, 1500);
    assert.equal(parser.lastEventId, '1');
  });

  test('takes lines cut anywhere and ended by CRLF, CR or LF, a CRLF cut between its two characters too', () => {
    const { events } = parse('id: 7\r', '\nevent: plant.del', 'eted\rdata: {"id":', '5}\r\n', '\r\n', 'data: x\n\n');
    assert.deepEqual(events, [
      { id: '7', type: 'plant.deleted', data: '{"id":5}' },
      { id: '7', type: 'message', data: 'x' },
    ]);
  });

  test('joins data lines with LF, drops one space after the colon (no more), and drops an unended event', () => {
    const { events, parser } = parse('data:a\ndata:  b\n\nevent: plant.created\ndata: lost');
    assert.deepEqual(events, [{ id: '', type: 'message', data: 'a\n b' }]);
    parser.reset();
    parser.push('\n');
    assert.equal(events.length, 1, 'the partial event went with the stream');
  });

  test('an id with NUL and a retry that is not digits are ignored; an event without data is not dispatched', () => {
    const { events, parser } = parse('id: 3\n\nid: 4\0\nretry: soon\nevent: plant.created\n\n');
    assert.deepEqual(events, []);
    assert.equal(parser.lastEventId, '3');
    assert.equal(parser.retryMs, undefined);
  });
});

/** A server that answers each connection with the next script; it records the requests' headers. */
async function scripted(scripts: Array<(request: IncomingMessage, response: ServerResponse) => void>) {
  const requests: IncomingMessage[] = [];
  const server = createServer((request, response) => {
    requests.push(request);
    const script = scripts[requests.length - 1];
    if (script) script(request, response);
    else response.writeHead(503, { 'retry-after': '60' }).end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
  return {
    url,
    requests,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

const stream = (response: ServerResponse, text: string): void =>
  void response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' }).write(text);

function follow(url: string, lastEventId?: string) {
  const events: StreamEvent[] = [];
  const states: FeedState[] = [];
  const client = new FeedClient({
    url,
    token: 'pst_test',
    lastEventId,
    onEvent: (event) => events.push(event),
    onState: (state) => states.push(state),
  });
  const running = client.run();
  return { client, events, states, running };
}

describe('FeedClient', () => {
  test('sends the token and Accept; after a drop it waits retry: and resumes with Last-Event-ID', async (t) => {
    const server = await scripted([
      (_request, response) => {
        stream(response, ': connected\nretry: 50\n\nid: 5\nevent: plant.created\ndata: {"id":5,"name":"Fern"}\n\n');
        response.end(); // the drop: the server restarts, say
      },
      (_request, response) => stream(response, 'retry: 50\n\nid: 6\nevent: plant.deleted\ndata: {"id":5}\n\n'),
    ]);
    t.after(server.close);
    const feed = follow(server.url);
    await eventually(async () => (feed.events.length === 2 ? true : undefined), 'both events');
    feed.client.stop();
    await feed.running;
    assert.deepEqual(
      feed.events.map((event) => [event.id, event.type]),
      [
        ['5', 'plant.created'],
        ['6', 'plant.deleted'],
      ],
    );
    const [first, second] = server.requests;
    assert.equal(first!.headers.authorization, 'Bearer pst_test');
    assert.equal(first!.headers.accept, 'text/event-stream');
    assert.equal(first!.headers['last-event-id'], undefined, 'the first connection starts from now');
    assert.equal(second!.headers['last-event-id'], '5');
    assert.deepEqual(
      feed.states.find((state) => state.kind === 'waiting'),
      { kind: 'waiting', ms: 50, why: 'the stream ended' },
      "the server's retry: is the wait",
    );
    assert.equal(server.requests.length, 2, 'no connection after stop()');
  });

  test('resumes after the id it is given; a 410 (past the retention) follows from now instead', async (t) => {
    const server = await scripted([
      (_request, response) => response.writeHead(410, { 'content-type': 'application/json' }).end('{}'),
      (_request, response) => stream(response, 'retry: 50\n\nid: 90\ndata: {}\n\n'),
    ]);
    t.after(server.close);
    const feed = follow(server.url, '12');
    await eventually(async () => (feed.events.length === 1 ? true : undefined), 'the event after the 410');
    feed.client.stop();
    await feed.running;
    assert.equal(server.requests[0]!.headers['last-event-id'], '12');
    assert.equal(server.requests[1]!.headers['last-event-id'], undefined);
    assert.equal(feed.client.lastEventId, '90');
    assert.deepEqual(
      feed.states.find((state) => state.kind === 'waiting'),
      { kind: 'waiting', ms: 0, why: 'the events since are past the retention', gap: true },
    );
  });

  test('stops for good on 401 and 403, saying why, and does not reconnect', async (t) => {
    for (const status of [401, 403]) {
      const server = await scripted([
        (_request, response) =>
          response
            .writeHead(status, { 'content-type': 'application/json' })
            .end(JSON.stringify({ error: status, message: `refused with ${status}` })),
      ]);
      t.after(server.close);
      const feed = follow(server.url);
      await feed.running; // settles by itself
      assert.deepEqual(feed.states.at(-1), { kind: 'stopped', why: `refused with ${status}`, status });
      assert.equal(server.requests.length, 1);
    }
  });
});
