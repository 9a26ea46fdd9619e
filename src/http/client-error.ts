import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { rawErrorResponse } from './raw-response.js';

/**
 * Errors Node's HTTP parser raises before Fastify sees a request (a bad request line, oversized
 * headers, a client too slow to send its request) still get the Error body (CONTRACT.md).
 */
export function clientErrorHandler(this: FastifyInstance, error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const message =
    status === 431
      ? 'the request headers are too large'
      : status === 408
        ? 'the request took too long to arrive'
        : `the request is not valid HTTP/1.1 (${error.code ?? 'parse error'})`;
  const response = rawErrorResponse(status, message);
  this.log.info({ status, code: error.code, reqId: /x-request-id: (\S+)/.exec(response)?.[1] }, 'client error');
  if (socket.writable) socket.end(response);
  socket.destroySoon();
}
