import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';

/** Query parameters whose value is a credential, whatever the caller calls it. */
const CREDENTIAL_PARAM = '(?:access_token|token|jwt|api_?key|key|authorization|secret|password)=';

// Credentials that callers put where they do not belong (a query string, a path) stay out of the
// logs. Each pattern is linear in the URL's length: a JWT is matched only from the start of a word.
const SECRETS: ReadonlyArray<[RegExp, string]> = [
  [/pst(?:_|%5f)[0-9A-Za-z]+/gi, '[redacted]'], // an API token, plain or percent-encoded
  [/(?<![\w-])eyJ[\w-]*\.[\w-]*\.[\w-]*/g, '[redacted]'], // a JWT
  [new RegExp(`((?:^|[?&;])${CREDENTIAL_PARAM})[^&;]*`, 'gi'), '$1[redacted]'],
];
/** Longer URLs are logged cut, with their length: a log line has no use for 16 KiB of query. */
const LOGGED_URL_MAX = 2048;

/** What every pattern above needs to match: most URLs (`/plants?limit=10`) have none of it. */
const SUSPECT = new RegExp(`pst(?:_|%5f)|eyJ|${CREDENTIAL_PARAM}`, 'i');

/** The URL as logged: any credential in it replaced by `[redacted]`, and cut at 2 KiB. */
export function redactUrl(url: string): string {
  let out = url.length > LOGGED_URL_MAX ? url.slice(0, LOGGED_URL_MAX) : url;
  if (SUSPECT.test(out)) for (const [pattern, replacement] of SECRETS) out = out.replace(pattern, replacement);
  return url.length > LOGGED_URL_MAX ? `${out}…(${url.length} characters)` : out;
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
    if (request.log.level === 'debug' || request.log.level === 'trace') {
      request.log.debug({ method: request.method, url: redactUrl(request.url) }, 'incoming request');
    }
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
