import { type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { knockedOut } from '../knockouts.js';
import pino, { type Logger } from 'pino';

/** Query parameters whose value is a credential, whatever the caller calls it. */
const CREDENTIAL_PARAM = '(?:access_token|token|ticket|jwt|api_?key|key|authorization|secret|password)=';

// Credentials that callers put where they do not belong (a query string, a path) stay out of the
// logs. Each pattern is linear in the URL's length: a JWT is matched only from the start of a word.
const SECRETS: ReadonlyArray<[RegExp, string]> = [
  [/pst(?:_|%5f)[0-9A-Za-z]+/gi, '[redacted]'], // an API token, plain or percent-encoded
  [/pse(?:_|%5f)[\w-]+/gi, '[redacted]'], // a ticket of the change feed (events/event-tickets.ts)
  [/(?<![\w-])eyJ[\w-]*\.[\w-]*\.[\w-]*/g, '[redacted]'], // a JWT
  [new RegExp(`((?:^|[?&;])${CREDENTIAL_PARAM})[^&;]*`, 'gi'), '$1[redacted]'],
];
/** Longer URLs are logged cut, with their length: a log line has no use for 16 KiB of query. */
const LOGGED_URL_MAX = 2048;

/** What every pattern above needs to match: most URLs (`/plants?limit=10`) have none of it. */
const SUSPECT = new RegExp(`ps[te](?:_|%5f)|eyJ|${CREDENTIAL_PARAM}`, 'i');

/** The URL as logged: any credential in it replaced by `[redacted]`, and cut at 2 KiB. */
export function redactUrl(url: string): string {
  let out = url.length > LOGGED_URL_MAX ? url.slice(0, LOGGED_URL_MAX) : url;
  if (SUSPECT.test(out)) for (const [pattern, replacement] of SECRETS) out = out.replace(pattern, replacement);
  return url.length > LOGGED_URL_MAX ? `${out}…(${url.length} characters)` : out;
}

const symbols = pino.symbols;

/** The parts of a pino logger that pino exposes for integrations (`pino.symbols`). */
interface Parts {
  /** By level: the line's start, `{"level":30`. */
  readonly [symbols.lsCacheSym]: Readonly<Record<number, string>>;
  /** `,"time":…` */
  readonly [symbols.timeSym]: () => string;
  /** The logger's bindings: `,"pid":…,"hostname":…,"reqId":…`. */
  readonly [symbols.chindingsSym]: string;
  /** `}` and the newline. */
  readonly [symbols.endSym]: string;
  readonly [symbols.streamSym]: { write(line: string): unknown };
}
type PinoParts = Logger & Parts;

const INFO = 30; // pino's number for the info level

/** Who an authenticated request acted for, as its line names it: the token's public id and its subject. */
export interface RequestActor {
  readonly tokenId: string;
  readonly subject: string;
}

/**
 * The request line, as `log.info({ method, url, status, ms, tokenId, subject }, 'request completed')`
 * would write it (a test holds them equal; `tokenId` and `subject` only for an authenticated
 * request), built from the logger's own parts: it skips pino's walk over the object's keys and
 * serializers, which cost more per request than the rest of the line.
 */
export function requestLine(
  log: Logger,
  method: string,
  url: string,
  status: number,
  ms: number,
  actor?: RequestActor,
): string {
  const parts = log as PinoParts;
  // Never the token or its secret: the id is the token's public half (`token list` prints it).
  const who =
    actor === undefined ? '' : `,"tokenId":${JSON.stringify(actor.tokenId)},"subject":${JSON.stringify(actor.subject)}`;
  // An HTTP method is a token (RFC 9110 §5.6.2): it has nothing JSON must escape.
  return `${parts[symbols.lsCacheSym][INFO]}${parts[symbols.timeSym]()}${parts[symbols.chindingsSym]},"method":"${method}","url":${JSON.stringify(url)},"status":${status},"ms":${ms}${who},"msg":"request completed"${parts[symbols.endSym]}`;
}

/**
 * One log line per request, written when the response has gone: method, URL, status and time, and
 * for an authenticated request the token's id and subject (an operator finds whether a token is
 * still used before revoking it). Fastify's own controller writes two (incoming and completed) with whole request and response
 * objects; the incoming line is kept at debug level. Headers are never logged, so neither is a token.
 */
export class RequestLog extends LogController {
  readonly #off = knockedOut('request-log');

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
    const log = request.log as PinoParts; // the app's logger is pino's (app.ts)
    if (!log.isLevelEnabled('info')) return;
    const ms = Math.round(reply.elapsedTime * 100) / 100;
    // Set by the authentication hook of the API's routes only; undefined for the rest and for refused tokens.
    const actor = (request as { principal?: RequestActor }).principal;
    if (this.#off) return; // a benchmark's knock-out (src/knockouts.ts)
    log[symbols.streamSym].write(requestLine(log, request.method, redactUrl(request.url), reply.statusCode, ms, actor));
  }

  /** The completed line says it: a 404 status. */
  override routeNotFound(): void {}
}
