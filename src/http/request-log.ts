import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

// Credentials that callers put where they do not belong (a query string, a path) stay out of the logs.
const SECRETS: ReadonlyArray<[RegExp, string]> = [
  [/pst_[0-9A-Za-z]+/g, '[redacted]'], // an API token
  [/eyJ[\w-]*\.[\w-]*\.[\w-]*/g, '[redacted]'], // a JWT
  [/((?:access_)?token=)[^&]*/gi, '$1[redacted]'], // any query parameter named token or access_token
];

/** The URL as logged: any credential in it is replaced by `[redacted]`. */
export function redactUrl(url: string): string {
  let out = url;
  for (const [pattern, replacement] of SECRETS) out = out.replace(pattern, replacement);
  return out;
}

/**
 * One log line per request, written when the response has gone: method, URL, status and time.
 * Fastify's own controller writes two (incoming and completed) with whole request and response
 * objects; the incoming line is kept at debug level. Headers are never logged, so neither is a token.
 */
export class RequestLog extends LogController {
  /** Every answered request is also counted here (the Prometheus metrics). */
  constructor(
    private readonly observe?: (method: string, route: string | undefined, status: number, seconds: number) => void,
  ) {
    super();
  }

  override incomingRequest(request: FastifyRequest): void {
    request.log.debug({ method: request.method, url: redactUrl(request.url) }, 'incoming request');
  }

  override requestCompleted(_error: unknown, request: FastifyRequest, reply: FastifyReply): void {
    this.observe?.(
      request.method,
      request.is404 ? undefined : request.routeOptions.url,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
    request.log.info(
      {
        method: request.method,
        url: redactUrl(request.url),
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request completed',
    );
  }

  /** The completed line says it: a 404 status. */
  override routeNotFound(): void {}
}
