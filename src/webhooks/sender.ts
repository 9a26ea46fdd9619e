import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { storableText } from '../store/webhook-store.js';
import { checkedLookup, checkWebhookUrl, type Resolve } from './address-policy.js';

export interface WebhookSenderOptions {
  /** WEBHOOK_ALLOW_PRIVATE=1: `http://` and non-public targets, for development and tests only. */
  readonly allowPrivate: boolean;
  /** Replaces the system resolver (tests; a DNS cache). */
  readonly resolve?: Resolve;
  /** The whole attempt: connect, headers and body (docs/api.md#delivery: a 2xx within 10 s). */
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
  /**
   * Whose delivery it is (the webhook's subject): connections are pooled per origin and per
   * subject, so that one subject's slow receivers never hold the sockets another subject's
   * deliveries to the same host need (a shared ingress, a receiving platform).
   */
  readonly subject?: string;
}

/** Interim 1xx answers accepted before the final one: an endless stream of them would hold the event loop. */
export const MAX_INTERIM_ANSWERS = 10;

/** node:http's Agent, its pools keyed by origin and by the `subject` a request carries. */
class SubjectPools extends HttpAgent {
  override getName(options?: Parameters<HttpAgent['getName']>[0] & { subject?: string }): string {
    return `${super.getName(options)}:${options?.subject ?? ''}`;
  }
}
class TlsSubjectPools extends HttpsAgent {
  override getName(options?: Parameters<HttpsAgent['getName']>[0] & { subject?: string }): string {
    return `${super.getName(options)}:${options?.subject ?? ''}`;
  }
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
  /** A broker acknowledged the message (a destination's attempt): delivered, with no HTTP status. */
  accepted?: true;
}

/** Error codes of Node sockets, in the words a delivery record shows its owner. */
const NETWORK_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the receiver',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed by the receiver',
};
/** node:http's ECONNRESET when the receiver closed (a FIN, no reset) before its answer, or within its body. */
const CLOSED_MESSAGES = new Set(['socket hang up', 'aborted']);
/** WebhookAddressError's code: checkedLookup refused every address the name resolved to. */
const REFUSED_CODE = 'EWEBHOOKADDRESS';

function errorCode(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const code = (error as NodeJS.ErrnoException).code;
  // Happy Eyeballs (autoSelectFamily) reports every failed address together.
  if (code === undefined && error instanceof AggregateError) return errorCode(error.errors[0]);
  return code;
}

/**
 * Sends webhook deliveries with node:http, one keep-alive Agent for http:// and one for https://.
 * Their sockets resolve names through `checkedLookup`, so each new connection is checked against
 * the address policy and made to the very address that was checked (docs/api.md#delivery: a refused
 * target fails the attempt, and nothing is sent). node:http, not undici: undici 7's HTTP/1.1 client
 * drops the connection on an interim `100 Continue`, which a receiver may send before its final
 * answer (interface 1.3.0; RFC 9110 §15.2); node:http skips every 1xx but 101.
 */
export class WebhookSender {
  readonly #http: HttpAgent;
  readonly #https: HttpsAgent;
  readonly #allowPrivate: boolean;
  readonly #timeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #sending = new Set<Promise<WebhookAttempt>>();
  #closing: Promise<void> | undefined;

  constructor(options: WebhookSenderOptions) {
    this.#allowPrivate = options.allowPrivate;
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#maxResponseBytes = options.maxResponseBytes ?? 1024;
    const agentOptions = {
      keepAlive: true,
      maxSockets: options.connectionsPerOrigin ?? 8,
      // An idle connection closes after 4 s (undici's default), sooner if the receiver's
      // `Keep-Alive: timeout=` says so; the abort signal in send() bounds the attempt itself.
      timeout: 4_000,
      lookup: checkedLookup({ allowPrivate: options.allowPrivate, resolve: options.resolve }),
    };
    this.#http = new SubjectPools(agentOptions);
    this.#https = new TlsSubjectPools(agentOptions);
  }

  /** POSTs one delivery. Never throws: every failure is the attempt's `error`. */
  send(request: WebhookRequest): Promise<WebhookAttempt> {
    if (this.#closing !== undefined) return Promise.resolve({ durationMs: 0, error: 'the sender is closed' });
    const sending = this.#attempt(request).finally(() => this.#sending.delete(sending));
    this.#sending.add(sending);
    return sending;
  }

  /** Lets the sends in flight finish, then closes every connection; later sends fail. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= Promise.allSettled(this.#sending).then(() => {
      this.#http.destroy();
      this.#https.destroy();
    });
    return this.#closing;
  }

  async #attempt(request: WebhookRequest): Promise<WebhookAttempt> {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    // Literal addresses never reach `lookup` (net.connect skips it), so they are checked here, as
    // are URLs registered while private targets were allowed.
    const checked = checkWebhookUrl(request.url, { allowPrivate: this.#allowPrivate });
    if (!checked.ok) return { durationMs: elapsed(), error: checked.reason, refused: true };
    const { url } = checked;

    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.#timeoutMs);
    let status: number | undefined;
    try {
      const response = await this.#post(url, request, controller.signal);
      status = response.statusCode;
      const header = response.headers['retry-after'];
      const retryAfter = status === 429 || status === 503 ? header : undefined;
      const responseSnippet = await readPrefix(response, this.#maxResponseBytes);
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

  /**
   * The final answer's head; interim 1xx answers are skipped by node:http. No redirect is
   * followed: a 3xx is an answer like any other (docs/api.md#delivery). Aborting destroys the request
   * and its socket, whether the head or the body was on its way.
   */
  #post(url: URL, request: WebhookRequest, signal: AbortSignal): Promise<IncomingMessage> {
    const tls = url.protocol === 'https:';
    return new Promise((resolve, reject) => {
      const outgoing = (tls ? httpsRequest : httpRequest)(url, {
        method: 'POST',
        agent: tls ? this.#https : this.#http,
        headers: { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) },
        signal,
        // Read by the agents' getName: the pool of this subject for this origin.
        ...(request.subject !== undefined && { subject: request.subject }),
      });
      outgoing.on('response', resolve);
      // RFC 9110 allows interim answers, not an endless stream of them: each is parsed on the event loop.
      let interim = 0;
      outgoing.on('information', () => {
        if (++interim > MAX_INTERIM_ANSWERS) {
          outgoing.destroy(
            Object.assign(new Error(`more than ${MAX_INTERIM_ANSWERS} interim (1xx) answers before the final one`), {
              code: 'ETOOMANYINTERIM',
            }),
          );
        }
      });
      // `on`, not `once`: a later error (an abort while the body is read) must find a listener.
      outgoing.on('error', reject);
      // A close with neither an answer nor an error: a 101 that no upgrade asked for makes node:http
      // destroy the socket silently, and the abort that follows emits nothing either.
      outgoing.on('close', () => reject(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })));
      outgoing.end(request.body);
    });
  }

  #describe(error: unknown, url: URL, timedOut: boolean): string {
    const code = errorCode(error);
    if (timedOut) return `timeout after ${this.#timeoutMs} ms`;
    if (code === REFUSED_CODE && error instanceof Error) return error.message;
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return `host ${url.hostname} not found`;
    const message = error instanceof Error ? error.message : String(error);
    if (code === 'ECONNRESET' && CLOSED_MESSAGES.has(message)) return 'connection closed by the receiver';
    if (code !== undefined && code in NETWORK_ERRORS) return NETWORK_ERRORS[code] ?? code;
    // TLS failures (certificate, handshake) carry OpenSSL's or Node's own explanation.
    if (code !== undefined && (code.startsWith('ERR_TLS_') || /CERT|SSL/.test(code))) return `TLS error: ${message}`;
    return message === '' ? (code ?? 'request failed') : message;
  }
}

/**
 * Keeps the first `limit` bytes of a response body, as text every engine stores
 * (docs/api.md#webhooks: "whatever its bytes"): decoded as UTF-8, each byte that is not UTF-8
 * becomes U+FFFD, and so does U+0000, which a PostgreSQL text column refuses (a 200 with `ok\0`
 * once left its delivery to be sent again for ever). Leaving the loop early destroys the stream and
 * its socket, instead of reading a large or endless answer.
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
