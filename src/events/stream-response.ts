import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { reconnectionTime } from './event-streams.js';

/**
 * Whether a stream's body is chunked (RFC 9112 §7.1): to an HTTP/1.1 client, which must accept
 * chunks. An HTTP/1.0 client knows none; its body ends with the connection. The head declares it
 * (startStream) and EventStream frames its writes by it: one decision, never read back from Node.
 */
export const chunkedBody = (request: FastifyRequest): boolean => request.raw.httpVersion === '1.1';

/** Takes the answer over from Fastify and sends the head of a text/event-stream: 200, always. */
export function startStream(request: FastifyRequest, reply: FastifyReply): ServerResponse {
  reply.hijack();
  const raw = reply.raw;
  // What the hooks set (CORS, RateLimit-*) goes out too: Node merges these into writeHead's.
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) raw.setHeader(name, value);
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-request-id': request.id,
    'x-accel-buffering': 'no', // nginx: pass each event on at once
    // The connection ends with the stream: the client's reconnect opens a new one, which reaches a
    // server that listens, rather than reusing one to a server that is draining.
    connection: 'close',
    // Declared, not left to Node: Node frames what write() and end() send by it, and ends the body
    // with the last chunk; EventStream writes whole chunks of its own after the head.
    ...(chunkedBody(request) ? { 'transfer-encoding': 'chunked' } : {}),
  });
  raw.flushHeaders();
  return raw;
}

/**
 * A stream request that reaches a server whose streams have ended (it drains): 200, a `retry:`
 * hint and the end at once. EventSource reconnects after that time (by then to another worker or
 * instance, or to a refused port it keeps trying); a 503 would make it give up for good (WHATWG
 * HTML §9.2.3: any status but 200 fails the connection).
 */
export function reconnectLater(request: FastifyRequest, reply: FastifyReply): void {
  startStream(request, reply).end(
    `: the server is restarting; reconnect to resume the feed\nretry: ${reconnectionTime()}\n\n`,
  );
}
