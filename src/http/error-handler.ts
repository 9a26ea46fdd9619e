import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { HttpError, type ValidationIssue, describeValidation, errorBody } from '../errors.js';
import { StoreUnavailableError } from '../store/store.js';
import type { DatabaseOutage } from './outage.js';

/**
 * Maps any error to a status and message. Statuses come from typed errors and Fastify's error
 * codes, never from message text (docs/conventions.md#errors).
 */
export function classify(error: FastifyError | HttpError): { status: number; message: string } {
  if (error instanceof HttpError) return { status: error.statusCode, message: error.message };
  const validation = error.validation as ValidationIssue[] | undefined;
  if (validation?.[0]) {
    return { status: 400, message: describeValidation(error.validationContext ?? 'request', validation) };
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) return { status, message: error.message || STATUS_CODES[status] || 'error' };
  return { status: status >= 500 && status < 600 ? status : 500, message: 'internal server error' };
}

/** How long a caller should wait before retrying when the database is unavailable. */
export const UNAVAILABLE_RETRY_AFTER = '2';

/**
 * The app's error handler. `outage` (the server's) turns a refusal for an unavailable database into
 * its away/back lines; without it each such request logs a warning line of its own.
 */
export function errorHandler(outage?: DatabaseOutage) {
  return (raised: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    const unavailable = raised instanceof StoreUnavailableError;
    const error = unavailable
      ? new HttpError(503, 'the database is unavailable; retry shortly', { 'retry-after': UNAVAILABLE_RETRY_AFTER })
      : raised;
    // The reason once, not doubled: pino's serializer appends each cause's message to the error's.
    if (unavailable && outage !== undefined) outage.refused(raised.message);
    else if (unavailable) request.log.warn({ reason: raised.message }, 'database unavailable');
    const { status, message } = classify(error);
    // Only the unexpected carries a stack.
    if (status >= 500 && !(error instanceof HttpError)) request.log.error({ err: error }, 'request failed');
    // A deliberate answer, not a bug: a 5xx one (overload, shutdown, keys unreachable) is a warning.
    else if (status >= 500 && !unavailable) request.log.warn({ status, reason: message }, 'request rejected');
    else if (status < 500)
      request.log.info(
        error instanceof HttpError && error.logFields
          ? { status, reason: message, ...error.logFields }
          : { status, reason: message },
        'request rejected',
      );
    if (error instanceof HttpError) void reply.headers(error.headers);
    void reply.code(status).send(errorBody(status, message));
  };
}
