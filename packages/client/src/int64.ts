/**
 * Plant ids are int64 (docs/api.md#int64-ids): a JS number loses integers above 2^53, so this
 * client takes them only as `bigint` or as decimal text, and writes them into JSON and URLs as
 * exact digits.
 */
export type Int64 = bigint | string;

export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

const DECIMAL = /^-?(?:0|[1-9][0-9]*)$/;

/** The id as a bigint; a TypeError for anything but a bigint or a string, a RangeError outside int64. */
export function toInt64(id: unknown): bigint {
  let value: bigint;
  if (typeof id === 'bigint') value = id;
  else if (typeof id === 'string') {
    if (!DECIMAL.test(id)) throw new RangeError(`not an int64 id: ${describe(id)} is not a decimal integer`);
    value = BigInt(id);
  } else {
    // Numbers are refused even when safe: accepting 5 but not 2**53 + 1 would hide the bug until it bites.
    throw new TypeError(`an id must be a bigint or a decimal string, not a ${typeof id}`);
  }
  if (value < INT64_MIN || value > INT64_MAX) {
    throw new RangeError(`not an int64 id: ${describe(id)} is outside ${INT64_MIN} … ${INT64_MAX}`);
  }
  return value;
}

/** True when `id` names an int64 exactly (a bigint in range, or canonical-enough decimal text). */
export function isInt64(id: unknown): id is Int64 {
  try {
    toInt64(id);
    return true;
  } catch {
    return false;
  }
}

const describe = (id: unknown): string => {
  const text = String(id);
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
};
