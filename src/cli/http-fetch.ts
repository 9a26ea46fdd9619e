import { request as httpRequest, type IncomingMessage } from 'node:http';

// The `fetch` the plants commands give their client: one request over node:http, answered as the
// little of a Response that @plant-store/client reads (status, statusText, headers.get, text).
// The global fetch loads node's bundled undici on its first call: 0.1 s of CPU, as much as the rest
// of a `plants list`, and a command must answer in under 0.5 s on a busy 2-core host.
// It fails as fetch does, so the client's retry rules read it the same: TypeError('fetch failed')
// with the socket's error as its cause, or the signal's reason once the signal aborted.

type Fetch = typeof fetch;

/** Headers.get over node's lower-cased header object: several values joined as fetch joins them. */
const headersOf = (message: IncomingMessage): Pick<Headers, 'get' | 'has'> => ({
  get: (name) => {
    const value = message.headers[name.toLowerCase()];
    return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
  },
  has: (name) => message.headers[name.toLowerCase()] !== undefined,
});

export const httpFetch: Fetch = async (input, init = {}) => {
  // Never `instanceof Request`: the global Request is undici's too, loaded on first use.
  const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
  // https:// loads TLS only when asked for: most CLI calls go to a local http:// server.
  const send = url.protocol === 'https:' ? (await import('node:https')).request : httpRequest;
  const body = typeof init.body === 'string' ? init.body : undefined;
  if (init.body != null && body === undefined) throw new TypeError('httpFetch sends string bodies only');
  // A plain object, a Headers or a list of pairs (never `new Headers()`: that would load undici).
  const given = init.headers ?? {};
  const pairs = Symbol.iterator in given ? [...(given as Iterable<[string, string]>)] : Object.entries(given);
  const headers = new Map(pairs.map(([name, value]) => [name.toLowerCase(), String(value)]));
  if (body !== undefined) headers.set('content-length', String(Buffer.byteLength(body)));
  const signal = init.signal ?? undefined;
  signal?.throwIfAborted();
  return new Promise((resolve, reject) => {
    const failed = (cause: unknown): void =>
      // An aborted signal's reason: the DOMException TimeoutError of AbortSignal.timeout, an Error.
      reject(signal?.aborted ? (signal.reason as Error) : new TypeError('fetch failed', { cause }));
    const req = send(url, { method: init.method ?? 'GET', headers: Object.fromEntries(headers), signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.once('error', failed);
      res.once('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        // The client reads these four members only (packages/client/src/client.ts, #send).
        const answer = {
          status: res.statusCode ?? 0,
          statusText: res.statusMessage ?? '',
          headers: headersOf(res),
          text: () => Promise.resolve(text),
        };
        resolve(answer as unknown as Response);
      });
    });
    req.once('error', failed);
    req.end(body);
  });
};
