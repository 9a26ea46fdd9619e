import { ErrorSchema } from '../wire/schemas.js';
import type { ApiPart } from './openapi.js';

/** Every error answer's body, named in the OpenAPI document. */
export const ERRORS_API: ApiPart = { schemas: [['Error', ErrorSchema]] };

const DESCRIPTIONS: Record<number, string> = {
  400: 'The request is malformed: bad JSON, a value outside its rules, a bad cursor, or two Authorization headers.',
  401: 'No bearer token, or one that is malformed, unknown, expired or revoked. See `WWW-Authenticate`.',
  403: 'The token lacks the scope this operation needs. See `WWW-Authenticate`.',
  404: 'Nothing with this id that the caller can reach: no such plant, webhook or delivery.',
  408: 'The request did not arrive within the time limit (`HEADERS_TIMEOUT`, `REQUEST_TIMEOUT`).',
  409: 'A conflict: another plant already has this id, or the caller already has its maximum of webhooks (20).',
  410: 'The events after this id are past the retention: read the plants again, then follow the feed from now.',
  413: 'The body is larger than the limit (16 KiB by default).',
  415: 'The body is not `application/json` in UTF-8, or has a `Content-Encoding`.',
  429: 'Too many requests for this token. See `Retry-After` and `RateLimit-*`.',
  431: 'The request headers are too large.',
  500: 'An unexpected error; the message says nothing more, the logs have the details under the request id.',
  503: 'The database is unavailable or the server is shutting down. See `Retry-After`.',
};

/** Error responses for a route schema: each status the route can send, with the Error body. */
export function errorResponses(...statuses: number[]): Record<number, typeof ErrorSchema> {
  return Object.fromEntries(
    statuses.map((status) => [status, { ...ErrorSchema, description: DESCRIPTIONS[status] ?? 'Error' }]),
  );
}
