import { connect } from 'node:net';
import { type WireResponse, counter, parseResponse } from './wire.js';

// The HTTP-parser cases: requests written byte for byte, and one-shot exchanges that read
// everything the server sends until it closes the connection.

export interface RawCase {
  readonly kind: string;
  /** The request as a latin1 byte string; each `§` is a digit of a fresh 19-digit plant id (see ID_SLOT). */
  readonly bytes: string;
  /** End the client's side after writing (the request stops short). */
  readonly halfClose: boolean;
  /** The statuses the one answer may have; 'any': whatever it is, it is well-formed. */
  readonly expect: readonly number[] | 'any';
  /** Closing without any answer is acceptable. */
  readonly silenceOk: boolean;
}

/** Nineteen `§`, never elsewhere in a request: filled digit by digit, even when chunks split them. */
export const ID_SLOT = '\u00a7'.repeat(19);
export const HOST = 'Host: 127.0.0.1';
export const CLOSE = 'Connection: close';
export const JSON_TYPE = 'Content-Type: application/json';
export const BODY = `{"id":${ID_SLOT},"name":"fern"}`;

/** A request as a latin1 byte string: the request line, header lines, the blank line, the body. */
export const request = (line: string, headers: readonly string[], body = ''): string =>
  `${line}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n${body}`;

/** A case that expects one answer, written in full and kept open for it, unless told otherwise. */
export const make = (kind: string, bytes: string, expect: RawCase['expect'], more: Partial<RawCase> = {}): RawCase => ({
  kind,
  bytes,
  expect,
  halfClose: false,
  silenceOk: false,
  ...more,
});

export interface Exchange {
  /** Every response, in order. */
  readonly responses: readonly WireResponse[];
  /** Bytes after the last complete response: must be none. */
  readonly rest: Buffer;
  /** The server had not closed by the deadline (it waits for more of the request). */
  readonly open: boolean;
}

/**
 * Writes `request` on a new connection and collects the answers until the server closes it.
 * `halfClose` ends the client's side after writing, for requests that stop short: the server then
 * sees the end of the stream instead of waiting for its header or request timeout.
 */
export function exchange(port: number, request: Buffer, options: { halfClose?: boolean; waitMs?: number } = {}) {
  const { halfClose = false, waitMs = 3000 } = options;
  return new Promise<Exchange>((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const received: Buffer[] = [];
    let open = false;
    const timer = setTimeout(() => {
      open = true;
      socket.destroy();
    }, waitMs);
    const finish = (): void => {
      clearTimeout(timer);
      try {
        resolve({ ...parseAll(Buffer.concat(received)), open });
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    };
    socket.on('data', (data: Buffer) => void received.push(data));
    socket.on('end', () => socket.end());
    socket.on('close', finish);
    // A reset after the answer is still an answer: what counts is what was received.
    socket.on('error', () => undefined);
    socket.on('connect', () => {
      counter.requests += 1;
      socket.write(request);
      if (halfClose) socket.end();
    });
  });
}

/** Splits what a server sent into responses (each at most as long as its framing says). */
export function parseAll(data: Buffer): { responses: WireResponse[]; rest: Buffer } {
  const responses: WireResponse[] = [];
  let rest = data;
  for (;;) {
    const parsed = rest.length === 0 ? undefined : parseResponse(rest, false, true);
    if (!parsed) return { responses, rest };
    responses.push(parsed.response);
    rest = rest.subarray(parsed.used);
  }
}
