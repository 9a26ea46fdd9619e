import { hash, randomInt, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API tokens look like `pst_<id:12><secret:32><checksum:6>`, all base62. The prefix makes a
 * leaked token easy to recognise (and to scan for); the CRC32 checksum, as in GitHub's tokens,
 * lets a typo or a guess be refused before any lookup. The id is the public half: `token list`
 * shows it and the store finds the token by it, so lookups never depend on the secret.
 */
export const TOKEN_PREFIX = 'pst_';
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const ID_LENGTH = 12;
const SECRET_LENGTH = 32; // 32 base62 characters ≈ 190 bits
const CHECKSUM_LENGTH = 6;
const TOKEN_SHAPE = new RegExp(
  `^${TOKEN_PREFIX}([0-9A-Za-z]{${ID_LENGTH}})[0-9A-Za-z]{${SECRET_LENGTH}}([0-9A-Za-z]{${CHECKSUM_LENGTH}})$`,
);

export const SCOPES = ['plants:read', 'plants:write', 'plants:admin', 'webhooks:read', 'webhooks:write'] as const;
export type Scope = (typeof SCOPES)[number];

function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

function checksum(text: string): string {
  let n = crc32(text);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = ALPHABET[n % 62]! + out;
    n = Math.floor(n / 62);
  }
  return out;
}

export function hashToken(token: string): Buffer {
  return hash('sha256', token, 'buffer');
}

/** Compares digests, never secrets, in time independent of where they differ. */
export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** One digest's room, reused: `tokenMatches` runs on every request, and runs synchronously. */
const presented = Buffer.alloc(32);

/**
 * Whether `token`'s SHA-256 digest is `digest`, compared with `timingSafeEqual` as `sameHash` does.
 * The digest is taken as a string and copied into a buffer kept for it: a new Buffer per digest
 * (one allocation outside the heap) cost twice as much as the rest of the check.
 */
export function tokenMatches(token: string, digest: Buffer): boolean {
  presented.write(hash('sha256', token, 'binary'), 'binary');
  return sameHash(presented, digest);
}

export function mintToken(): { id: string; token: string } {
  const id = randomBase62(ID_LENGTH);
  const body = `${TOKEN_PREFIX}${id}${randomBase62(SECRET_LENGTH)}`;
  return { id, token: body + checksum(body) };
}

const TOKEN_ID = new RegExp(`^[0-9A-Za-z]{${ID_LENGTH}}$`);

/** Whether `text` has the shape of a token's id (the public half that `token list` prints). */
export const isTokenId = (text: string): boolean => TOKEN_ID.test(text);

/** The token's id when it has the right shape and checksum; undefined otherwise. */
export function parseToken(token: string): string | undefined {
  const id = tokenId(token);
  return id !== undefined && hasValidChecksum(token) ? id : undefined;
}

/** The token's id when it has the right shape, its checksum unchecked. */
export function tokenId(token: string): string | undefined {
  return TOKEN_SHAPE.exec(token)?.[1];
}

/** Whether the last characters are the checksum of the rest (a token of the right shape). */
export function hasValidChecksum(token: string): boolean {
  return checksum(token.slice(0, -CHECKSUM_LENGTH)) === token.slice(-CHECKSUM_LENGTH);
}

/** A subject (the owner of plants): 1 to 200 characters, no control characters, well-formed text. */
const SUBJECT = /^[^\u0000-\u001f\u007f]{1,200}$/u;
export const isSubject = (text: string): boolean => SUBJECT.test(text) && text.isWellFormed();

export function isScope(text: string): text is Scope {
  return (SCOPES as readonly string[]).includes(text);
}
