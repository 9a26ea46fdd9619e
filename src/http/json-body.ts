import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { HttpError } from '../errors.js';
import { JsonSyntaxError, parseStrictJson } from './strict-json.js';

const JSON_MEDIA_TYPE = /^application\/json[\t ]*(?:;|$)/i;
const CHARSET = /;[\t ]*charset[\t ]*=[\t ]*"?([^";\t ]*)"?/i;

/** Whether the Content-Type is application/json, in UTF-8 if it names a charset (RFC 8259 §8.1). */
export function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined || !JSON_MEDIA_TYPE.test(header)) return false;
  const charset = CHARSET.exec(header)?.[1];
  return charset === undefined || /^utf-?8$/i.test(charset);
}

const notJson = (): HttpError =>
  new HttpError(415, 'the body must be JSON in UTF-8: send Content-Type: application/json');

/** A 415 for a body this service cannot read: not JSON, or compressed (RFC 9110 §15.5.16). */
function unreadable(request: FastifyRequest): HttpError | undefined {
  if (!isJsonContentType(request.headers['content-type'])) return notJson();
  const encoding = request.headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') {
    return new HttpError(415, `Content-Encoding ${encoding} is not supported; send the body uncompressed`, {
      'accept-encoding': 'identity',
    });
  }
  return undefined;
}

/** preValidation for routes with a body: also refuses a body-less request without the right type. */
export async function requireJson(request: FastifyRequest): Promise<void> {
  const error = unreadable(request);
  if (error) throw error;
}

/**
 * preValidation for a route whose body may be left out (POST …/secret): a request with none (no
 * Content-Length, or 0, and no Transfer-Encoding) reads as `{}`, as curl's and the CLI's body-less
 * POST is meant; one with a body is held to requireJson's rules.
 */
export async function jsonOrNothing(request: FastifyRequest): Promise<void> {
  const length = request.headers['content-length'];
  const none = (length === undefined || length.trim() === '0') && request.headers['transfer-encoding'] === undefined;
  if (none) request.body = {};
  else await requireJson(request);
}

/** Replaces Fastify's body parsers with one: strict JSON in UTF-8, everything else a 415. */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    const error = unreadable(request);
    if (error) {
      done(error, undefined);
    } else if (body.length === 0) {
      // No body at all, only the header (clients often send Content-Type on every request): a
      // DELETE goes on; a POST is refused by its schema ("body must be object").
      done(null, undefined);
    } else if (!isUtf8(body)) {
      done(new HttpError(400, 'the body is not valid UTF-8'), undefined);
    } else {
      try {
        done(null, parseStrictJson(body.toString('utf8')));
      } catch (error) {
        if (!(error instanceof JsonSyntaxError)) throw error;
        done(new HttpError(400, `the body is not valid JSON: ${error.message}`), undefined);
      }
    }
  });
  // Any other Content-Type, or none with a body: a 415 that says what to send. Without this
  // catch-all Fastify would answer with its own FST_ERR_CTP_INVALID_MEDIA_TYPE, "Unsupported Media
  // Type", the one error that would not say it. Unknown routes still answer 404/405, as Fastify's
  // default lets them.
  app.addContentTypeParser('*', (request, _payload, done) => {
    if (request.is404) done(null, undefined);
    else done(unreadable(request) ?? notJson(), undefined);
  });
}
