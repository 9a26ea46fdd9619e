/**
 * The small language src/contract.ts and src/webhook-contract.ts describe the API's schemas in:
 * each field's JSON types, format, allowed values and whether it is required. test/contract.test.ts
 * compares these with the OpenAPI document the server serves; the types below turn them into
 * TypeScript types the compiler compares with the exported interfaces; `readShaped` reads an
 * answer by them.
 */

export type FieldType = 'string' | 'integer' | 'null' | 'object' | 'array';

export interface FieldShape {
  readonly type: FieldType | readonly FieldType[];
  readonly format?: 'int32' | 'int64' | 'date-time';
  readonly required: boolean;
  /** The only values a string may take (an enum, or a union of constants, in the document). */
  readonly values?: readonly string[];
  /** An array's items. */
  readonly items?: Omit<FieldShape, 'required'>;
}

export type ObjectShape = Readonly<Record<string, FieldShape>>;

// Compile-time: the type a shape describes. `Int` is how an int64 is typed: `Int64` (a bigint or
// decimal text) where the client writes one, `bigint` where it reads one.
type One<T, F extends Omit<FieldShape, 'required'>, Int> = T extends 'string'
  ? F['values'] extends readonly (infer V)[]
    ? V
    : string
  : T extends 'integer'
    ? F['format'] extends 'int64'
      ? Int
      : number
    : T extends 'null'
      ? null
      : T extends 'object'
        ? object
        : T extends 'array'
          ? F['items'] extends Omit<FieldShape, 'required'>
            ? readonly Value<F['items'], Int>[]
            : never
          : never;
type Value<F extends Omit<FieldShape, 'required'>, Int> = F['type'] extends readonly (infer U)[]
  ? One<U, F, Int>
  : One<F['type'], F, Int>;
export type Simplify<T> = { [K in keyof T]: T[K] };
export type Shaped<S extends ObjectShape, Int> = Simplify<
  { -readonly [K in keyof S as S[K]['required'] extends true ? K : never]: Value<S[K], Int> } & {
    -readonly [K in keyof S as S[K]['required'] extends true ? never : K]?: Value<S[K], Int>;
  }
>;
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export type Assert<T extends true> = T;

/**
 * A copy of `value` (as parseExactJson reads it: every integer a bigint) with exactly the fields of
 * `shape`, or undefined when a required field is missing or one does not fit. int64 fields stay
 * bigints; other integers become numbers, when they are safe ones. Unknown fields are dropped
 * (an additive change of the API), so the result is what the type says.
 */
export function readShaped<T>(value: unknown, shape: ObjectShape): T | undefined {
  if (!isRecord(value)) return undefined;
  const copy: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(shape)) {
    if (!Object.hasOwn(value, key)) {
      if (field.required) return undefined;
      continue;
    }
    const read = readField(value[key], field);
    if (read === MISFIT) return undefined;
    copy[key] = read;
  }
  return copy as T;
}

const MISFIT = Symbol('misfit');

function readField(value: unknown, field: Omit<FieldShape, 'required'>): unknown {
  for (const type of [field.type].flat()) {
    if (type === 'null' && value === null) return null;
    if (type === 'string' && typeof value === 'string' && (field.values?.includes(value) ?? true)) return value;
    if (type === 'integer' && typeof value === 'bigint') {
      if (field.format === 'int64') return value;
      if (value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(value);
    }
    if (type === 'object' && isRecord(value)) return value;
    if (type === 'array' && Array.isArray(value) && field.items !== undefined) {
      const items = value.map((item) => readField(item, field.items!));
      if (!items.includes(MISFIT)) return items;
    }
  }
  return MISFIT;
}

export const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
