import { hash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { COMPRESSION_THRESHOLD, type Encoding, encode, negotiateEncoding, varyOnEncoding } from './compression.js';

// Conditional requests (docs/api.md#compression-etags-and-cors): a body sent again and again
// carries a strong entity tag made from its bytes, and `If-None-Match` with that tag answers 304
// (RFC 9110 §13.1.2, §15.4.5).

/**
 * A body that many responses send (a list page): its text, and for each content coding its bytes
 * and its strong entity tag (RFC 9110 §8.8.3), each made once. The identity tag is a digest of the
 * bytes, so any server over the same data gives the same one; a coding's tag is that tag with
 * `-gzip` or `-br` inside the quotes (as Apache's mod_deflate does), since the compressed bytes
 * follow from the identity bytes and fixed settings.
 */
export class Representation {
  readonly etag: string;
  /** Bytes of the identity body. */
  readonly size: number;
  private readonly tags: Record<Encoding, string>;
  private br: Buffer | undefined;
  private gzip: Buffer | undefined;

  /**
   * @param metadata a header value sent with the body that the tag must cover too (a page's Link:
   *   two pages can hold the same names, and so the same bytes, with different next cursors).
   */
  constructor(
    readonly text: string,
    readonly type: string,
    readonly metadata?: string,
  ) {
    this.size = Buffer.byteLength(text);
    // 132 bits of SHA-256: collisions are out of reach, and the header stays short.
    const digest = hash('sha256', metadata === undefined ? text : `${metadata}\n${text}`, 'base64url').slice(0, 22);
    this.etag = `"${digest}"`;
    this.tags = { identity: this.etag, gzip: `"${digest}-gzip"`, br: `"${digest}-br"` };
  }

  tag(encoding: Encoding): string {
    return this.tags[encoding];
  }

  /** The body in a coding: kept here, else from `shared` (other objects of the same bytes), else made. */
  encoded(encoding: 'br' | 'gzip', shared: EncodedBodies): Buffer | Promise<Buffer> {
    const own = this[encoding];
    if (own !== undefined) return own;
    const tag = this.tags[encoding];
    const known = shared.get(tag);
    if (known !== undefined) return (this[encoding] = known);
    const made = encode(this.text, encoding);
    const keep = (bytes: Buffer): Buffer => {
      shared.set(tag, bytes);
      return (this[encoding] = bytes);
    };
    return made instanceof Promise ? made.then(keep) : keep(made);
  }
}

/**
 * Compressed bodies by entity tag, least recently used out first past `maxBytes`. On PostgreSQL
 * every request makes its page anew; this keeps it from being compressed anew (10–30 µs each).
 */
export class EncodedBodies {
  private readonly byTag = new Map<string, Buffer>();
  private bytes = 0;

  constructor(private readonly maxBytes = 8 * 1024 * 1024) {}

  get(tag: string): Buffer | undefined {
    const bytes = this.byTag.get(tag);
    if (bytes !== undefined) {
      this.byTag.delete(tag);
      this.byTag.set(tag, bytes);
    }
    return bytes;
  }

  set(tag: string, bytes: Buffer): void {
    if (bytes.length > this.maxBytes || this.byTag.has(tag)) return;
    this.byTag.set(tag, bytes);
    this.bytes += bytes.length;
    for (const [oldest, old] of this.byTag) {
      if (this.bytes <= this.maxBytes) break;
      this.byTag.delete(oldest);
      this.bytes -= old.length;
    }
  }
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x09;

/**
 * Whether an If-None-Match value names `etag` by the weak comparison (`W/"x"` matches `"x"`,
 * RFC 9110 §8.8.3.2, §13.1.2), or is `*` (the resource exists). A value that is not a list of
 * entity tags is ignored: the full answer is the safe one.
 */
export function noneMatch(field: string, etag: string): boolean {
  const value = field.trim();
  if (value === '*') return true;
  let found = false;
  let i = 0;
  while (i < value.length) {
    const c = value.charCodeAt(i);
    if (isSpace(c) || c === 0x2c) {
      i++;
      continue;
    }
    const open = value.startsWith('W/', i) ? i + 2 : i;
    if (value.charCodeAt(open) !== 0x22) return false;
    const close = value.indexOf('"', open + 1);
    if (close < 0) return false;
    if (close + 1 - open === etag.length && value.startsWith(etag, open)) found = true;
    for (i = close + 1; i < value.length && isSpace(value.charCodeAt(i)); i++);
    if (i < value.length && value.charCodeAt(i) !== 0x2c) return false;
  }
  return found;
}

/**
 * Sends `body` in the coding the request accepts (bodies under the threshold as they are), with
 * its entity tag; or 304 when If-None-Match names that tag. The caller has set the other headers
 * a 200 would carry (Link); the 304 keeps them, as RFC 9110 §15.4.5 asks, and has no content
 * headers. It runs in the route, after authentication and authorization: no token, no 304.
 */
export function sendRepresentation(
  request: FastifyRequest,
  reply: FastifyReply,
  body: Representation,
  shared: EncodedBodies,
): FastifyReply | Promise<FastifyReply> {
  let encoding: Encoding = 'identity';
  if (body.size >= COMPRESSION_THRESHOLD) {
    varyOnEncoding(reply);
    encoding = negotiateEncoding(request.headers['accept-encoding']);
  }
  const etag = body.tag(encoding);
  void reply.header('etag', etag);
  const condition = request.headers['if-none-match'];
  const unchanged = condition !== undefined && noneMatch(condition, etag);
  // A 304 to GET has no body and no content headers. One to HEAD answers as a HEAD 200 would, only
  // with 304: Fastify's HEAD hook drops the body and sets Content-Length to its size, where without
  // one it would send 0, a length the 200 would not have (RFC 9110 §8.6).
  if (unchanged && request.method !== 'HEAD') return reply.code(304).send();
  if (unchanged) void reply.code(304);
  if (encoding === 'identity') return reply.type(body.type).send(body.text);
  const bytes = body.encoded(encoding, shared);
  void reply.header('content-encoding', encoding).type(body.type);
  return bytes instanceof Promise ? bytes.then((encoded) => reply.send(encoded)) : reply.send(bytes);
}
