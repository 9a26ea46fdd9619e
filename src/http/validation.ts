import { Ajv, type AnySchema, type ValidateFunction } from 'ajv';
import type { FastifySchemaCompiler } from 'fastify';
import { INT64_MAX, INT64_MIN, parseDecimalBigInt } from '../wire/int64.js';

/**
 * One schema serves validation and the OpenAPI document. Two places need more than Ajv offers,
 * so the schema is rewritten (mechanically, never by hand) before Ajv compiles it:
 *  - `{type: integer, format: int64}` becomes the `int64` keyword, because Ajv has no bigint: in a
 *    body the strict JSON reader hands over bigints; in a path or query string a decimal text is
 *    turned into a bigint. An id never becomes a JS number.
 *  - other integers in a path or query string become the `decimal` keyword: plain digits only.
 *    Ajv's own coercion would take " 5", "0x10" and "1e2" as numbers. In a body (where the strict
 *    JSON reader hands over every integer as a bigint) the same keyword takes the bigint, as a number.
 */

/** RFC 3339 §5.6 `date-time`, exactly: a date, a time and an offset (the schemas' format, the CLI's times). */
export const RFC3339_DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

type Schema = Record<string, unknown>;

interface DataContext {
  parentData: Record<string | number, unknown>;
  parentDataProperty: string | number;
}

function rewrite(schema: unknown, fromText: boolean): unknown {
  if (Array.isArray(schema)) return schema.map((s) => rewrite(s, fromText));
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Schema = {};
  for (const [key, value] of Object.entries(schema)) out[key] = rewrite(value, fromText);
  if (out.type === 'integer' && out.format === 'int64') {
    const { type: _type, format: _format, ...rest } = out;
    return { ...rest, int64: fromText ? 'text' : 'json' };
  }
  if (out.type === 'integer') {
    const { type: _type, format: _format, minimum, maximum, ...rest } = out;
    return { ...rest, decimal: { minimum, maximum, json: !fromText } };
  }
  return out;
}

function replace(ctx: DataContext | undefined, value: unknown): void {
  if (ctx) ctx.parentData[ctx.parentDataProperty] = value;
}

function makeAjv(): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    useDefaults: true,
    coerceTypes: false,
    strict: false,
    // OpenAPI's numeric formats (the keywords above enforce them), and RFC 3339 §5.6 date-time.
    formats: {
      int32: true,
      int64: true,
      'date-time': RFC3339_DATE_TIME,
    },
    // parentSchema in errors: the error handler says the failing field's rule from its keywords (errors.ts).
    verbose: true,
  });
  ajv.addKeyword({
    keyword: 'int64',
    modifying: true,
    errors: false,
    validate(mode: 'json' | 'text', data: unknown, _schema?: unknown, ctx?: DataContext) {
      if (typeof data === 'bigint') return data >= INT64_MIN && data <= INT64_MAX;
      if (mode !== 'text' || typeof data !== 'string') return false;
      const value = parseDecimalBigInt(data);
      replace(ctx, value);
      return value !== undefined;
    },
  });
  ajv.addKeyword({
    keyword: 'decimal',
    modifying: true,
    errors: false,
    validate(
      range: { minimum?: number; maximum?: number; json: boolean },
      data: unknown,
      _schema?: unknown,
      ctx?: DataContext,
    ) {
      const value = range.json
        ? typeof data === 'bigint' && data >= -(2n ** 53n) && data <= 2n ** 53n
          ? Number(data)
          : data
        : typeof data === 'string' && /^[0-9]{1,15}$/.test(data)
          ? Number(data)
          : data;
      if (typeof value !== 'number' || !Number.isInteger(value)) return false;
      replace(ctx, value);
      return value >= (range.minimum ?? -Infinity) && value <= (range.maximum ?? Infinity);
    },
  });
  return ajv;
}

/**
 * The compiled validators, shared by every app the process builds: a schema is a module's constant,
 * compiled once however many apps use it (a server builds one; the tests build a thousand, and
 * compiling was most of the cost of each). A validator keeps no state between calls.
 */
let compiled:
  { bodies: Ajv; texts: Ajv; cache: Record<'body' | 'text', WeakMap<object, ValidateFunction>> } | undefined;

export function createValidatorCompiler(): FastifySchemaCompiler<unknown> {
  compiled ??= { bodies: makeAjv(), texts: makeAjv(), cache: { body: new WeakMap(), text: new WeakMap() } };
  const { bodies, texts, cache } = compiled;
  return ({ schema, httpPart }): ValidateFunction => {
    const fromText = httpPart !== 'body';
    const compile = (): ValidateFunction => (fromText ? texts : bodies).compile(rewrite(schema, fromText) as AnySchema);
    if (schema === null || typeof schema !== 'object') return compile();
    const known = cache[fromText ? 'text' : 'body'];
    let validate = known.get(schema);
    if (validate === undefined) {
      validate = compile();
      known.set(schema, validate);
    }
    return validate;
  };
}
