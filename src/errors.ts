import { STATUS_CODES } from 'node:http';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { DatabaseOutage } from './http/outage.js';
import { StoreUnavailableError } from './store/store.js';

/** The one way code below the routes says "answer with this status": the handler writes the body. */
export class HttpError extends Error {
  override name = 'HttpError';
  readonly statusCode: number;
  readonly headers: Readonly<Record<string, string>>;
  /** What the log line of this refusal says beyond status and message: who was refused and why (never a secret). */
  readonly logFields: Readonly<Record<string, unknown>> | undefined;

  constructor(
    statusCode: number,
    message: string,
    headers: Readonly<Record<string, string>> = {},
    logFields?: Readonly<Record<string, unknown>>,
  ) {
    // An answer, not a bug: no stack trace to capture (it cost 9% of a 401 in a CPU profile).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.statusCode = statusCode;
    this.headers = headers;
    this.logFields = logFields;
  }
}

export interface ErrorBody {
  error: number;
  message: string;
}

export function errorBody(status: number, message: string): ErrorBody {
  return { error: status, message };
}

export interface ValidationIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
  parentSchema?: { description?: string };
}

/** Turns the first schema violation into a sentence a caller can act on. */
export function describeValidation(part: string, issue: ValidationIssue): string {
  const where = `${part}${issue.instancePath.replaceAll('/', '.')}`;
  switch (issue.keyword) {
    case 'required':
      return `${where} must have the property "${String(issue.params.missingProperty)}"`;
    case 'additionalProperties':
      return `${where} has an unknown property "${String(issue.params.additionalProperty)}"`;
    case 'type':
      return `${where} must be ${String(issue.params.type).replaceAll(',', ' or ')}`;
    default: {
      const description = issue.parentSchema?.description;
      return description ? `${where} must be ${description}` : `${where} ${issue.message ?? 'is invalid'}`;
    }
  }
}

/**
 * Maps any error to a status and message. Statuses come from typed errors and Fastify's error
 * codes, never from message text (STYLE.md, "One error path").
 */
export function classify(error: FastifyError | HttpError): { status: number; message: string } {
  if (error instanceof HttpError) return { status: error.statusCode, message: error.message };
  const validation = error.validation as ValidationIssue[] | undefined;
  if (validation?.[0]) {
    return { status: 400, message: describeValidation(error.validationContext ?? 'request', validation[0]) };
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) return { status, message: error.message || STATUS_CODES[status] || 'error' };
  return { status: status >= 500 && status < 600 ? status : 500, message: 'internal server error' };
}

/** How long a caller should wait before retrying when the database is unavailable. */
const UNAVAILABLE_RETRY_AFTER = '2';

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
