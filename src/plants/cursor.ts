import { parseDecimalBigInt } from '../wire/int64.js';

// A cursor names the last id of the page it follows. It is opaque to callers (base64url) so that
// its form can change; one this service did not issue is a 400.
const PREFIX = 'p1:';

export function encodeCursor(lastId: bigint): string {
  return Buffer.from(`${PREFIX}${lastId}`).toString('base64url');
}

/** The last id the cursor names, or undefined when the text is not a cursor of ours. */
export function decodeCursor(cursor: string): bigint | undefined {
  const text = Buffer.from(cursor, 'base64url').toString('latin1');
  if (!text.startsWith(PREFIX)) return undefined;
  const id = parseDecimalBigInt(text.slice(PREFIX.length));
  return id !== undefined && encodeCursor(id) === cursor ? id : undefined;
}
