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

/** preValidation for routes with a body: also refuses a body-less request without the right type. */
export async function requireJson(request: FastifyRequest): Promise<void> {
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new HttpError(415, 'the body must be JSON: send Content-Type: application/json');
  }
}

/** Replaces Fastify's body parsers with one: strict JSON in UTF-8, everything else a 415. */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body: Buffer, done) => {
    if (!isJsonContentType(request.headers['content-type'])) {
      done(new HttpError(415, 'JSON bodies must be UTF-8: send Content-Type: application/json'), undefined);
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
}
