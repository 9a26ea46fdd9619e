import assert from 'node:assert/strict';
import { type AddressInfo, connect } from 'node:net';
import type { TestContext } from 'node:test';
import type { LightMyRequestResponse } from 'fastify';
import type { TestApp } from '../helpers.js';

/** Asserts the response is the contract's Error body for `status`: exactly `error` and a non-empty `message`. */
export function assertErrorBody(response: LightMyRequestResponse, status: number): void {
  assert.equal(response.statusCode, status, `status (body: ${response.body})`);
  assert.match(String(response.headers['content-type']), /^application\/json\b/i);
  assertErrorJson(response.body, status);
}

/** The same check for a raw body text. */
export function assertErrorJson(body: string, status: number): void {
  const parsed = JSON.parse(body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(parsed).sort(), ['error', 'message']);
  assert.equal(parsed.error, status);
  assert.equal(typeof parsed.message, 'string');
  assert.ok((parsed.message as string).length > 0, 'the message is not empty');
  assert.doesNotMatch(parsed.message as string, /\n\s+at /, 'no stack trace');
}

export interface RawResponse {
  readonly status: number;
  /** Lower-case names; the last value of a repeated header. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Parses what a server wrote on a socket that it then closed. */
export function parseRaw(text: string): RawResponse {
  const split = text.indexOf('\r\n\r\n');
  assert.ok(split > 0, `a complete HTTP response, got ${JSON.stringify(text)}`);
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine);
  assert.ok(m, `a status line, got ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(m[1]), headers, body: text.slice(split + 4) };
}

/** Makes the app listen on an ephemeral port of 127.0.0.1 and answers the port. */
export async function listen(h: TestApp): Promise<number> {
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  return (h.app.server.address() as AddressInfo).port;
}

/**
 * Writes `chunks` on a fresh connection and answers everything the server sends until it closes
 * the connection: requests should say `Connection: close`, or be ones the server must refuse.
 */
export function rawExchange(t: TestContext, port: number, ...chunks: Array<string | Buffer>): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' });
    t.after(() => void socket.destroy());
    const received: Buffer[] = [];
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      resolve(Buffer.concat(received).toString('utf8'));
    };
    socket.on('data', (data: Buffer) => void received.push(data));
    socket.on('end', finish);
    socket.on('close', finish);
    // A reset after the answer is still an answer; a reset before any byte is a failure.
    socket.on('error', (error) => (received.length > 0 ? finish() : reject(error)));
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
    });
  });
}
