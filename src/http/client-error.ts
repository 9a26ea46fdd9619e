import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { isLingering } from './lingering-close.js';
import { rawErrorResponse } from './raw-response.js';

/**
 * Errors Node's HTTP parser raises before Fastify sees a request (a bad request line, oversized
 * headers, a client too slow to send its request) still get the Error body (docs/api.md#errors).
 */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  // Answered already, and closing: a deadline (the request timeout) or a broken body ends it now.
  if (isLingering(socket)) return void socket.destroy();
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message =
    status === 431
      ? 'the request headers are too large'
      : status === 408
        ? 'the request took too long to arrive'
        : `the request is not valid HTTP/1.1 (${error.code ?? 'parse error'})`;
  const response = rawErrorResponse(status, message);
  this.log.info({ status, code: error.code, reqId: /x-request-id: (\S+)/.exec(response)?.[1] }, 'client error');
  // The response Node is writing on this socket, if any (as its own handler checks).
  const pending = (): ServerResponse | null | undefined =>
    (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (pending()?.headersSent && pending()?.req.complete === false) {
    // This request was answered before its body was read; the body's framing is what broke. One
    // answer per request: close once that answer is out, without a second one.
    socket.destroySoon();
    return;
  }
  // Complete, valid requests before the broken one (pipelining) are answered first, in order
  // (RFC 9112 §9.3.2): as each answer finishes, Node hands the socket to the next; the 400 goes
  // out when none is left.
  const answerWhenIdle = (): void => {
    const current = pending();
    if (current && !current.writableFinished && current.req.complete) {
      current.once('finish', () => process.nextTick(answerWhenIdle));
      current.once('close', () => current.writableFinished || socket.destroySoon());
      return;
    }
    if (socket.writable) socket.end(response);
    socket.destroySoon();
  };
  answerWhenIdle();
}
