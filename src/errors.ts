import { textPattern } from './wire/schemas.js';

/** The one way code below the routes says "answer with this status": http/error-handler.ts writes the body. */
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
  /** The schema the failing value was checked against (Ajv's `verbose`). */
  parentSchema?: Record<string, unknown>;
}

const INT64_RANGE = '-9223372036854775808 to 9223372036854775807';
const DIGITS_PATTERN = /^\^\[0-9\]\{(\d+),(\d+)\}\$$/;

const TYPES: Readonly<Record<string, string>> = {
  string: 'a string',
  object: 'a JSON object',
  array: 'an array',
  boolean: 'true or false',
  number: 'a number',
  integer: 'an integer',
  null: 'null',
};

const range = (min: unknown, max: unknown, unit: string): string =>
  typeof min === 'number' && typeof max === 'number'
    ? `${min} to ${max} ${unit}`
    : typeof max === 'number'
      ? `at most ${max} ${unit}`
      : `at least ${typeof min === 'number' ? min : 0} ${unit}`;

/** The rule of a text field, from its length and pattern keywords. */
function textRule(schema: Record<string, unknown>): string {
  const { minLength, maxLength, pattern, format } = schema;
  if (format === 'date-time') {
    const [example = '2025-03-01T06:00:00Z'] = (schema.examples as unknown[] | undefined) ?? [];
    return `an RFC 3339 date-time such as ${String(example)}`;
  }
  const bounds = typeof pattern === 'string' ? /\{(\d+),(\d+)\}\$$/.exec(pattern) : null;
  const [min, max] = [Number(bounds?.[1]), Number(bounds?.[2])];
  if (bounds && pattern === textPattern(max, min)) {
    return `text of ${min === 0 ? `at most ${max}` : `${min} to ${max}`} Unicode code points, none of them a control character (U+0000–U+001F, U+007F) or a lone surrogate`;
  }
  const digits = typeof pattern === 'string' ? DIGITS_PATTERN.exec(pattern) : null;
  if (digits) return range(Number(digits[1]), Number(digits[2]), 'digits (0-9)');
  const length =
    minLength === undefined && maxLength === undefined
      ? 'text'
      : `text of ${range(minLength, maxLength, 'characters')}`;
  return typeof pattern === 'string' ? `${length} matching ${pattern}` : length;
}

/**
 * What a schema takes, said from its keywords alone: never from its `description`, which says what
 * the field is for and does not read as a rule ("must be how many deliveries, newest first").
 */
export function schemaRule(schema: Record<string, unknown>): string {
  if ('const' in schema) return JSON.stringify(schema.const);
  if (Array.isArray(schema.enum)) return `one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  const branches = (schema.anyOf ?? schema.oneOf) as Record<string, unknown>[] | undefined;
  if (Array.isArray(branches)) {
    const rules = branches.map(schemaRule);
    return branches.every((b) => 'const' in b) ? `one of ${rules.join(', ')}` : rules.join(' or ');
  }
  if (schema.int64 !== undefined) {
    return schema.int64 === 'text'
      ? `a 64-bit integer in decimal digits (${INT64_RANGE})`
      : `a 64-bit integer (${INT64_RANGE})`;
  }
  if (schema.decimal !== undefined) {
    const { minimum, maximum } = schema.decimal as { minimum?: number; maximum?: number };
    if (minimum === undefined && maximum === undefined) return 'an integer';
    if (minimum !== undefined && maximum !== undefined) return `an integer from ${minimum} to ${maximum}`;
    return minimum !== undefined ? `an integer of at least ${minimum}` : `an integer of at most ${maximum}`;
  }
  const types = ([] as unknown[]).concat(schema.type ?? []).map(String);
  const nullable = types.includes('null');
  const main = types.filter((t) => t !== 'null');
  let rule: string;
  if (main.length === 1 && main[0] === 'string') rule = textRule(schema);
  else if (main.length === 1 && main[0] === 'array') {
    const items = schema.items as Record<string, unknown> | undefined;
    rule = `an array${items === undefined ? '' : ` of ${schemaRule(items)}`}`;
    if (typeof schema.minItems === 'number') rule += `, at least ${schema.minItems}`;
    if (schema.uniqueItems === true) rule += ', each once';
  } else rule = main.map((t) => TYPES[t] ?? t).join(' or ') || 'valid';
  return nullable ? `null or ${rule}` : rule;
}

/**
 * The issue a caller should read: an `anyOf`'s own (Ajv lists each branch's issue before it), else
 * the first.
 */
function chosen(issues: readonly ValidationIssue[]): ValidationIssue {
  return issues.find((i) => i.keyword === 'anyOf' || i.keyword === 'oneOf') ?? issues[0]!;
}

/**
 * Turns a schema violation into a sentence a caller can act on: the field (`querystring.limit`,
 * `body.events.0`), then its rule, built from the schema's keywords.
 */
export function describeValidation(part: string, issues: readonly ValidationIssue[]): string {
  const issue = chosen(issues);
  const where = `${part}${issue.instancePath.replaceAll('/', '.')}`;
  const schema = issue.parentSchema ?? {};
  switch (issue.keyword) {
    case 'required':
      return `${where} must have the property "${String(issue.params.missingProperty)}"`;
    case 'additionalProperties':
      return `${where} has an unknown property "${String(issue.params.additionalProperty)}"`;
    case 'minProperties': {
      const names = Object.keys((schema.properties as Record<string, unknown> | undefined) ?? {});
      return `${where} must have at least ${String(issue.params.limit)} of the properties ${names.join(', ')}`;
    }
    case 'minItems':
      return `${where} must have at least ${String(issue.params.limit)} item${issue.params.limit === 1 ? '' : 's'}`;
    case 'maxItems':
      return `${where} must have at most ${String(issue.params.limit)} items`;
    case 'uniqueItems':
      return `${where} must not list the same item twice (items ${String(issue.params.j)} and ${String(issue.params.i)})`;
    default:
      return issue.parentSchema === undefined
        ? `${where} ${issue.message ?? 'is invalid'}`
        : `${where} must be ${schemaRule(schema)}`;
  }
}
