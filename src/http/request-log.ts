import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/**
 * One log line per request, written when the response has gone: method, URL, status and time.
 * Fastify's own controller writes two (incoming and completed) with whole request and response
 * objects; the incoming line is kept at debug level. Headers are never logged, so neither is a token.
 */
export class RequestLog extends LogController {
  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ method: request.method, url: request.url }, 'incoming request');
  }

  override requestCompleted(_error: unknown, request: FastifyRequest, reply: FastifyReply): void {
    request.log.info(
      {
        method: request.method,
        url: request.url,
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request completed',
    );
  }

  /** The completed line says it: a 404 status. */
  override routeNotFound(): void {}
}
