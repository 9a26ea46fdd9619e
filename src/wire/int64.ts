// The int64 of the API's ids (docs/api.md#int64-ids), read from decimal text. Apart from http/validation.ts (which
// imports Ajv) so that what reads an id from a command line or a cursor loads no validator.

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** A decimal text such as "-12" or "0042" → bigint; anything else → undefined. */
export function parseDecimalBigInt(text: string): bigint | undefined {
  if (!/^-?[0-9]{1,40}$/.test(text)) return undefined;
  const value = BigInt(text);
  return value >= INT64_MIN && value <= INT64_MAX ? value : undefined;
}
