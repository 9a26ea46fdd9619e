import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/**
 * A lingering close (RFC 9112 §9.6, nginx's `lingering_close`): an answer sent before
 * the request's body arrived (413, 401, 403, 415, 429, 503…) closes its connection, but a client
 * is often still writing that body, and many (node's http, Python's http.client, Java's
 * HttpURLConnection) read nothing until they have written it all. Closed at once, the connection
 * answers the next bytes with a reset: the client's write fails (EPIPE) and the answer it had not
 * read yet is lost. So the server closes in stages: its half first (the answer, then FIN), then it
 * goes on reading and discarding the body until the client closes too, or a bound is reached.
 */

/**
 * How long a connection lingers at most once its answer is out; then it is closed, whatever the
 * client is doing, so that no one holds a connection open this way. nginx waits as long between
 * two reads (`lingering_timeout`); 5 s in all is stricter than its `lingering_time` of 30 s.
 */
export const LINGER_MS = 5_000;
/**
 * How much of the body is read and discarded at most from the answer on; past it the client is cut
 * off (a reset). Not 1 MiB: node's http.request, streaming a 20 MiB body under load, can still be
 * writing past 1 MiB, and now and then past 16 MiB, before it reads the answer, since the kernels'
 * buffers on both sides keep taking its writes; a smaller bound would lose such a client's answer
 * (the measurements: docs/decisions.md, "A body that is too large, and every answer before the body").
 */
export const LINGER_BYTES = 64 * 1024 * 1024;

/** Connections whose answer said `Connection: close` before their request's body had arrived. */
const closing = new WeakSet<Socket>();
/** Those whose answer is out: the server's half is closed, and what still arrives is discarded. */
const lingering = new WeakSet<Socket>();

/** Whether the connection of `request` closes after an answer already given: it takes no further request. */
export const isClosing = (request: IncomingMessage): boolean => closing.has(request.socket);

/** Whether `socket`'s answer is out and it is only discarding the rest: any error or deadline ends it. */
export const isLingering = (socket: Socket): boolean => lingering.has(socket);

/**
 * Makes the connection of `request`, answered before its body was read, close with a linger once
 * the answer is out. Node reads the body it still receives into the request and drops it (the
 * request stream flows with no one reading it); counting it here bounds how much. Node closes a
 * `Connection: close` connection with `destroySoon()` once its last response has finished: that
 * call, on this socket only, becomes the lingering close.
 */
export function lingerAfterAnswer(request: IncomingMessage): void {
  const socket = request.socket as Socket | null;
  if (socket === null || socket.destroyed || closing.has(socket)) return;
  closing.add(socket);
  let read = 0;
  request.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > LINGER_BYTES) socket.destroy();
  });
  socket.destroySoon = lingeringClose;
}

function lingeringClose(this: Socket): void {
  if (lingering.has(this) || this.destroyed) return; // once: the bounds end it
  lingering.add(this);
  const limit = setTimeout(() => this.destroy(), LINGER_MS).unref();
  this.once('close', () => clearTimeout(limit));
  // The answer is queued before this: it goes out, then the FIN. The client's FIN ends the rest:
  // Node's server is half-open, and destroys a socket once both halves have ended; a body cut
  // short by it, or the request timeout, ends it through clientError (isLingering).
  this.end();
}
