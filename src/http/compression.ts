import compress from '@fastify/compress';
import type { FastifyInstance, FastifyReply, onSendHookHandler } from 'fastify';
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from 'node:zlib';

// Compressed answers (docs/api.md#compression-etags-and-cors): gzip and brotli, chosen by
// Accept-Encoding (RFC 9110 §12.5.3).
// GET /plants encodes its pages itself (http/representation.ts), once a page, so that each encoding
// has its own entity tag; every other route goes through @fastify/compress with the same settings.

/**
 * Bodies below this many bytes are sent as they are. Such a body and the ~300 bytes of headers
 * fit one 1,460-byte TCP segment, so compressing saves no packet and no round trip, and it costs
 * 10–30 µs a response, half a whole GET or more (BENCHMARKS.md, "Compression and conditional requests").
 */
export const COMPRESSION_THRESHOLD = 1024;

export type Encoding = 'br' | 'gzip' | 'identity';

/** Quality 4, not zlib's 11: 11 costs several times the CPU for a few percent (@fastify/compress's default too). */
const brotliOptions = {
  params: { [constants.BROTLI_PARAM_QUALITY]: 4, [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT },
};
/** Above this size a body is compressed on libuv's threads, not on the event loop. */
const SYNC_LIMIT = 64 * 1024;

/** Deterministic: the same bytes with the same settings give the same output (so one entity tag each). */
export function encode(text: string, encoding: 'br' | 'gzip'): Buffer | Promise<Buffer> {
  const input = Buffer.from(text);
  if (input.length <= SYNC_LIMIT) return encoding === 'br' ? brotliCompressSync(input, brotliOptions) : gzipSync(input);
  return new Promise((resolve, reject) => {
    const done = (error: Error | null, output: Buffer): void => (error ? reject(error) : resolve(output));
    if (encoding === 'br') brotliCompress(input, brotliOptions, done);
    else gzip(input, done);
  });
}

const negotiated = new Map<string, Encoding>();

/**
 * The coding to send for an Accept-Encoding value: the acceptable one with the highest q, brotli
 * before gzip on a tie (smaller at the quality used here); identity when none is, or without the
 * field. `*` stands for every coding not named; `x-gzip` is gzip (RFC 9110 §12.5.3). Clients send
 * the same few values again and again, so the answers are remembered (a bounded map).
 */
export function negotiateEncoding(header: string | undefined): Encoding {
  if (header === undefined || header === '') return 'identity';
  let encoding = negotiated.get(header);
  if (encoding === undefined) {
    encoding = negotiate(header);
    if (negotiated.size >= 256) negotiated.clear();
    negotiated.set(header, encoding);
  }
  return encoding;
}

function negotiate(header: string): Encoding {
  const q = new Map<string, number>();
  for (const part of header.toLowerCase().split(',')) {
    const [coding = '', ...params] = part.split(';').map((s) => s.trim());
    if (coding === '') continue;
    let weight = 1;
    for (const param of params) {
      if (!/^q\s*=/.test(param)) continue;
      const m = /^q\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.exec(param);
      weight = m ? Number(m[1]) : 0; // a q-value out of its grammar claims nothing
    }
    q.set(coding === 'x-gzip' ? 'gzip' : coding, weight);
  }
  const weight = (coding: string): number => q.get(coding) ?? q.get('*') ?? 0;
  const br = weight('br');
  const gz = weight('gzip');
  if (br > 0 && br >= gz) return 'br';
  if (gz > 0) return 'gzip';
  return 'identity'; // also when identity is refused: the body as it is beats a 406 (RFC 9110 §12.5.3)
}

/** Adds `accept-encoding` to Vary, keeping what is there (the CORS layer's `Origin`). */
export function varyOnEncoding(reply: FastifyReply): void {
  const vary = reply.getHeader('vary');
  if (vary === undefined) void reply.header('vary', 'accept-encoding');
  else if (!/accept-encoding/i.test(String(vary))) void reply.header('vary', `${String(vary)}, accept-encoding`);
}

/**
 * @fastify/compress only marks the answers it compresses; an answer it would have compressed for
 * another Accept-Encoding depended on that field too, and says so (RFC 9110 §12.5.5).
 */
const varyWhenCompressible: onSendHookHandler = (_request, reply, payload, done) => {
  const status = reply.statusCode;
  if (payload !== null && payload !== undefined && status !== 204 && status !== 206 && status !== 304) {
    const body = payload as unknown;
    const size = typeof body === 'string' || Buffer.isBuffer(body) ? Buffer.byteLength(body) : Infinity; // a stream
    if (size >= COMPRESSION_THRESHOLD) varyOnEncoding(reply);
  }
  done(null, payload);
};

/**
 * Compression for every route registered after this, except those that opt out with
 * `compress: false` (GET /plants). Request bodies are not decompressed: a `Content-Encoding` on a
 * request is refused as before.
 */
export async function registerCompression(app: FastifyInstance): Promise<void> {
  await app.register(compress, {
    globalCompression: true,
    globalDecompression: false,
    encodings: ['br', 'gzip'],
    threshold: COMPRESSION_THRESHOLD,
    brotliOptions,
  });
  // After the plugin's own onRoute hook, so this runs after its onSend and sees what it decided.
  app.addHook('onRoute', (route) => {
    if (route.compress === false) return;
    const given = route.onSend;
    if (given === undefined) route.onSend = [varyWhenCompressible];
    else route.onSend = Array.isArray(given) ? [...given, varyWhenCompressible] : [given, varyWhenCompressible];
  });
}
