import { type Socket, connect } from 'node:net';

// A deliberately small HTTP/1.1 client over node:net. node:http would refuse or rewrite much of
// what the fuzzer sends (duplicate or malformed headers, raw bytes in the target, framing
// conflicts), so requests are written byte for byte and responses parsed here.

export interface WireResponse {
  readonly status: number;
  /** Lower-case names; every value of a repeated header, in order. */
  readonly headers: ReadonlyMap<string, readonly string[]>;
  readonly body: Buffer;
}

export interface WireRequest {
  readonly method: string;
  /** The request target as bytes in a latin1 string (see `bytes`). */
  readonly target: string;
  /** Written as given, in order; names and values as latin1 byte strings. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly body?: Buffer | undefined;
  /** Leave out the Host header (it is added otherwise). */
  readonly noHost?: boolean;
}

/** UTF-8 text as a byte string, one char per byte: what `encode` writes unchanged. */
export const bytes = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');

/** The request's bytes; Content-Length is added for a body unless a framing header is given. */
export function encode(request: WireRequest): Buffer {
  const lines = [`${request.method} ${request.target} HTTP/1.1`];
  if (!request.noHost) lines.push('Host: 127.0.0.1');
  for (const [name, value] of request.headers) lines.push(`${name}: ${value}`);
  const framed = request.headers.some(([name]) => /^(content-length|transfer-encoding)$/i.test(name));
  const body = request.body ?? Buffer.alloc(0);
  if (!framed && (body.length > 0 || request.method === 'POST')) lines.push(`Content-Length: ${body.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body]);
}

export const header = (response: WireResponse, name: string): string | undefined => response.headers.get(name)?.[0];

const STATUS_LINE = /^HTTP\/1\.1 ([1-5][0-9]{2}) [\x20-\x7e]*$/;

/**
 * Parses one response at the start of `data`. Answers undefined while it is incomplete (unless
 * `closed`, when the connection end delimits a body without a length) and throws on anything that
 * is not HTTP/1.1.
 */
export function parseResponse(
  data: Buffer,
  headRequest: boolean,
  closed: boolean,
): { response: WireResponse; used: number } | undefined {
  const end = data.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine = '', ...lines] = data.subarray(0, end).toString('latin1').split('\r\n');
  const m = STATUS_LINE.exec(statusLine);
  if (!m) throw new Error(`not an HTTP/1.1 status line: ${JSON.stringify(statusLine)}`);
  const status = Number(m[1]);
  const headers = new Map<string, string[]>();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error(`a malformed response header: ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(colon + 1).trim()]);
  }
  const start = end + 4;
  const done = (bodyEnd: number, body: Buffer) => ({ response: { status, headers, body }, used: bodyEnd });
  if (headRequest || status === 204 || status === 304 || status < 200) return done(start, Buffer.alloc(0));
  const chunked = headers.get('transfer-encoding')?.some((v) => /chunked/i.test(v));
  if (chunked) return parseChunked(data, start, done);
  const length = headers.get('content-length');
  if (length !== undefined) {
    if (length.length !== 1 || !/^[0-9]+$/.test(length[0]!)) throw new Error(`bad Content-Length ${String(length)}`);
    const bodyEnd = start + Number(length[0]);
    return data.length < bodyEnd ? undefined : done(bodyEnd, data.subarray(start, bodyEnd));
  }
  return closed ? done(data.length, data.subarray(start)) : undefined;
}

function parseChunked<T>(data: Buffer, start: number, done: (end: number, body: Buffer) => T): T | undefined {
  const parts: Buffer[] = [];
  let pos = start;
  for (;;) {
    const eol = data.indexOf('\r\n', pos);
    if (eol < 0) return undefined;
    const size = parseInt(data.subarray(pos, eol).toString('latin1').split(';', 1)[0]!, 16);
    if (Number.isNaN(size)) throw new Error('a malformed chunk size');
    if (size === 0) {
      const trailerEnd = data.indexOf('\r\n\r\n', eol);
      return trailerEnd < 0 ? undefined : done(trailerEnd + 4, Buffer.concat(parts));
    }
    if (data.length < eol + 2 + size + 2) return undefined;
    parts.push(data.subarray(eol + 2, eol + 2 + size));
    pos = eol + 2 + size + 2;
  }
}

/** Every request sent by any client of this process, and the statuses of the answers since the last `tally`. */
export const counter = { requests: 0, statuses: new Map<number, number>() };

/** The statuses answered since the last call, as `200×12 400×3`, for a test's diagnostics. */
export function tally(): string {
  const text = [...counter.statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}×${n}`);
  counter.statuses.clear();
  return text.join(' ');
}

/**
 * One keep-alive connection at a time, one request at a time; reconnects when the server closed.
 * Anything the server sends that is not the answer to a request (a second response, a partial
 * one, bytes before a request) is an error.
 */
export class WireClient {
  private socket: Socket | undefined;
  private received = Buffer.alloc(0);
  private closed = true;
  private wake: (() => void) | undefined;

  constructor(
    private readonly port: number,
    private readonly timeoutMs = 10_000,
  ) {}

  private open(): Socket {
    const socket = connect({ port: this.port, host: '127.0.0.1', noDelay: true });
    this.socket = socket;
    this.received = Buffer.alloc(0);
    this.closed = false;
    const notify = (): void => {
      const wake = this.wake;
      this.wake = undefined;
      wake?.();
    };
    socket.on('data', (chunk: Buffer) => {
      if (this.socket !== socket) return;
      this.received = Buffer.concat([this.received, chunk]);
      notify();
    });
    const close = (): void => {
      if (this.socket !== socket) return;
      this.closed = true;
      notify();
    };
    socket.on('end', close);
    socket.on('close', close);
    // A reset after the answer is read is still an answer; `close` follows an error.
    socket.on('error', () => undefined);
    return socket;
  }

  /** Sends one request and answers its response (after any 1xx interim ones). */
  async send(request: WireRequest): Promise<WireResponse> {
    if (this.received.length > 0) {
      throw new Error(`the server sent bytes nobody asked for: ${JSON.stringify(this.received.toString('latin1'))}`);
    }
    const socket = this.closed || !this.socket ? this.open() : this.socket;
    socket.write(encode(request));
    counter.requests += 1;
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      const parsed = parseResponse(this.received, request.method === 'HEAD', this.closed);
      if (parsed) {
        this.received = this.received.subarray(parsed.used);
        const { status } = parsed.response;
        if (status < 200) continue;
        counter.statuses.set(status, (counter.statuses.get(status) ?? 0) + 1);
        if (/close/i.test(header(parsed.response, 'connection') ?? '')) this.drop();
        return parsed.response;
      }
      if (this.closed) {
        const what = this.received.length === 0 ? 'no response' : 'a partial response';
        this.drop();
        throw new Error(`the server closed the connection after ${what}`);
      }
      if (Date.now() > deadline) {
        this.drop();
        throw new Error(`no response within ${this.timeoutMs} ms`);
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 100).unref();
      });
    }
  }

  private drop(): void {
    this.socket?.destroy();
    this.socket = undefined;
    this.received = Buffer.alloc(0);
    this.closed = true;
  }

  close(): void {
    this.drop();
  }
}
