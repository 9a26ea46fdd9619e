import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';

/**
 * A complete HTTP/1.1 response with the Error body, for the answers Node gives below Fastify
 * (parser errors, CONNECT): they carry the same headers as every other response, and close.
 */
export function rawErrorResponse(status: number, message: string, headers: Record<string, string> = {}): string {
  const body = JSON.stringify({ error: status, message });
  const all: Record<string, string> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(Buffer.byteLength(body)),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'x-request-id': randomUUID(),
    connection: 'close',
    ...headers,
  };
  const lines = Object.entries(all).map(([name, value]) => `${name}: ${value}\r\n`);
  return `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n${lines.join('')}\r\n${body}`;
}
