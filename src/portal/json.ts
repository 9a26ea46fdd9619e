// Ids are int64 (docs/api.md, "int64 ids"): JSON.parse would round one beyond 2^53 without a word.
// Strings are skipped whole (an escaped quote included), and a number of 16 digits or more that
// ends where a JSON value ends is read as its decimal text. No count or duration the API sends
// comes near that size.
const LONG_INTEGERS = /("(?:[^"\\]|\\.)*")|(-?\d{16,})(?=\s*[,\]}]|\s*$)/g;

/** JSON.parse that keeps long integers exact, as decimal strings. */
export function parseJson(text: string): unknown {
  return JSON.parse(text.replace(LONG_INTEGERS, (match, quoted: string | undefined) => quoted ?? `"${match}"`));
}

/** An id from parseJson (a number, or a long integer's text) as the decimal text the API takes back in paths. */
export const idText = (id: unknown): string => (typeof id === 'string' || typeof id === 'number' ? String(id) : '');
