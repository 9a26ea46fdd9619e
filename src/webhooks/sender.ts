import { Agent } from 'undici';
import { storableText } from '../store/store.js';
import { checkedLookup, checkWebhookUrl, type Resolve } from './address-policy.js';

export interface WebhookSenderOptions {
  /** WEBHOOK_ALLOW_PRIVATE=1: `http://` and non-public targets, for development and tests only. */
  readonly allowPrivate: boolean;
  /** Replaces the system resolver (tests; a DNS cache). */
  readonly resolve?: Resolve;
  /** The whole attempt: connect, headers and body (CONTRACT.md, Events: "a timeout (10 s)"). */
  readonly timeoutMs?: number;
  /** How much of the answer is kept for the attempt log (1 KiB); the rest is never read. */
  readonly maxResponseBytes?: number;
  /** Open connections per receiver origin, so one slow receiver cannot take every socket. */
  readonly connectionsPerOrigin?: number;
}

export interface WebhookRequest {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string | Uint8Array;
}

/**
 * One attempt. It succeeded only when `error` is absent and `status` is 2xx; a `status` with an
 * `error` means the receiver answered but the attempt still failed (the body outlived the deadline).
 */
export interface WebhookAttempt {
  status?: number;
  durationMs: number;
  error?: string;
  responseSnippet?: string;
  /** The address policy refused the target (after DNS resolution, or a literal address): nothing was sent. */
  refused?: true;
  /** The Retry-After header of a 429 or 503 answer, as sent. */
  retryAfter?: string;
}

class AttemptTimeout extends Error {}

/** Error codes of Node sockets and undici, in the words a delivery record shows its owner. */
const NETWORK_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the receiver',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed by the receiver',
  UND_ERR_SOCKET: 'connection closed by the receiver',
  UND_ERR_CLOSED: 'the sender is closed',
  UND_ERR_DESTROYED: 'the sender is closed',
};
/** WebhookAddressError's code: checkedLookup refused every address the name resolved to. */
const REFUSED_CODE = 'EWEBHOOKADDRESS';
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

function errorCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as NodeJS.ErrnoException).code;
  // Happy Eyeballs (autoSelectFamily) reports every failed address together.
  if (code === undefined && error instanceof AggregateError) return errorCode(error.errors[0]);
  return code;
}

/**
 * Sends webhook deliveries. One undici Agent serves every receiver; its connector resolves names
 * through `checkedLookup`, so each new connection is checked against the address policy and made to
 * the very address that was checked (CONTRACT.md, Events: refused "at every delivery after DNS
 * resolution (the attempt fails, nothing is sent)").
 */
export class WebhookSender {
  readonly #agent: Agent;
  readonly #allowPrivate: boolean;
  readonly #timeoutMs: number;
  readonly #maxResponseBytes: number;
  #closing: Promise<void> | undefined;

  constructor(options: WebhookSenderOptions) {
    this.#allowPrivate = options.allowPrivate;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#maxResponseBytes = options.maxResponseBytes ?? 1024;
    this.#agent = new Agent({
      connect: {
        lookup: checkedLookup({ allowPrivate: options.allowPrivate, resolve: options.resolve }),
        timeout: this.#timeoutMs,
      },
      connections: options.connectionsPerOrigin ?? 8,
      // Backstops only: the abort signal in send() bounds the whole attempt.
      headersTimeout: this.#timeoutMs,
      bodyTimeout: this.#timeoutMs,
    });
  }

  /** POSTs one delivery. Never throws: every failure is the attempt's `error`. */
  async send(request: WebhookRequest): Promise<WebhookAttempt> {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    // Literal addresses never reach `lookup` (net.connect skips it), so they are checked here, as
    // are URLs registered while private targets were allowed.
    const checked = checkWebhookUrl(request.url, { allowPrivate: this.#allowPrivate });
    if (!checked.ok) return { durationMs: elapsed(), error: checked.reason, refused: true };
    const { url } = checked;

    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new AttemptTimeout()), this.#timeoutMs);
    let status: number | undefined;
    try {
      // undici's request() follows no redirect: a 3xx is an answer like any other (CONTRACT.md).
      const response = await this.#agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        headers: request.headers,
        body: request.body,
        signal: controller.signal,
      });
      status = response.statusCode;
      const header = response.headers['retry-after'];
      const retryAfter = status === 429 || status === 503 ? (Array.isArray(header) ? header[0] : header) : undefined;
      const responseSnippet = await readPrefix(response.body, this.#maxResponseBytes);
      return { status, durationMs: elapsed(), responseSnippet, ...(retryAfter === undefined ? {} : { retryAfter }) };
    } catch (error) {
      const failure = this.#describe(error, url, controller.signal.aborted);
      if (status !== undefined) return { status, durationMs: elapsed(), error: failure };
      return errorCode(error) === REFUSED_CODE
        ? { durationMs: elapsed(), error: failure, refused: true }
        : { durationMs: elapsed(), error: failure };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Lets the sends in flight finish, then closes every connection; later sends fail. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#agent.close();
    return this.#closing;
  }

  #describe(error: unknown, url: URL, timedOut: boolean): string {
    const code = errorCode(error);
    if (timedOut || (code !== undefined && TIMEOUT_CODES.has(code))) return `timeout after ${this.#timeoutMs} ms`;
    if (code === 'EWEBHOOKADDRESS' && error instanceof Error) return error.message;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `host ${url.hostname} not found`;
    if (code !== undefined && code in NETWORK_ERRORS) return NETWORK_ERRORS[code] ?? code;
    const message = error instanceof Error ? error.message : String(error);
    // TLS failures (certificate, handshake) carry OpenSSL's or Node's own explanation.
    if (code !== undefined && (code.startsWith('ERR_TLS_') || /CERT|SSL/.test(code))) return `TLS error: ${message}`;
    return message === '' ? (code ?? 'request failed') : message;
  }
}

/**
 * Keeps the first `limit` bytes of a response body, as text every engine stores (contract 1.3.0:
 * "whatever its bytes"): decoded as UTF-8, each byte that is not UTF-8 becomes U+FFFD, and so does
 * U+0000, which a PostgreSQL text column refuses (a 200 with `ok\0` once left its delivery to be
 * sent again for ever). Leaving the loop early destroys the stream, which makes undici drop the
 * connection instead of reading a large or endless answer.
 */
async function readPrefix(body: AsyncIterable<Uint8Array>, limit: number): Promise<string> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.byteLength;
    if (size >= limit) break;
  }
  return storableText(Buffer.concat(chunks).subarray(0, limit).toString('utf8'));
}
