/**
 * When and how long to wait before sending a request again. Most operations this client calls are
 * safe to repeat: GET reads, DELETE of a gone plant or webhook changes nothing, the contract makes
 * an identical POST /plants answer 200 with the same plant, and a PATCH, a recover, a retry or an
 * enable sent twice leaves what one leaves. For those the only question is whether the failure is
 * one that a later attempt can cure. Three are not (OPERATIONS' `idempotent: false`): creating a
 * webhook, rotating its secret and pinging it do it again each time, so they are sent again only
 * when the failure says nothing was done.
 */

/**
 * 408: the server gave up reading the request; 429: the rate limit; 503: overload, a database
 * outage or a draining instance (all with Retry-After); 502 and 504: a gateway in front of it.
 * 500 is a bug, and 4xx other than 408 and 429 will be the same next time: neither is retried.
 */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([408, 429, 502, 503, 504]);

/**
 * Failures after which the request may nevertheless have been carried out (besides no answer at
 * all): a gateway's word that the server's answer did not come through (502, 504), and 503, which
 * this server also answers when its database connection fails during a commit. A 408 (the request
 * was not read) and a 429 (refused before it ran) say for sure that nothing was done.
 */
export const OUTCOME_UNKNOWN_STATUSES: ReadonlySet<number> = new Set([502, 503, 504]);

/**
 * Connection errors raised before a request could be written: the connection was refused, or the
 * host's name did not resolve. Nothing reached the server, so even an operation that is not
 * idempotent may be sent again. A reset, a closed socket or a timeout may come after the server
 * read the request: those are unknown outcomes.
 */
const NEVER_SENT_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/** Whether what `fetch` rejected with says the request never left this process. */
export function neverSent(cause: unknown): boolean {
  // fetch rejects with TypeError('fetch failed') and the socket's error as its cause; with several
  // addresses to try (happy eyeballs), an AggregateError of one error each.
  const inner = (cause as { cause?: unknown } | undefined)?.cause;
  const errors = inner instanceof AggregateError ? inner.errors : [inner];
  return (
    errors.length > 0 &&
    errors.every((error) => NEVER_SENT_CODES.has(String((error as { code?: unknown } | undefined)?.code)))
  );
}

export interface RetryPolicy {
  /** Attempts after the first; 0 turns retrying off. */
  readonly retries: number;
  /** The first backoff; each retry doubles it. */
  readonly baseDelayMs: number;
  /** The longest backoff. */
  readonly maxDelayMs: number;
  /** A `Retry-After` longer than this is not waited for: the error goes to the caller instead. */
  readonly maxRetryAfterMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  retries: 3,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  maxRetryAfterMs: 30_000,
};

/**
 * Exponential backoff with "equal jitter": half the doubled delay, plus up to as much again at
 * random, so clients that failed together do not come back together, yet each waits at least half.
 * Retry `n` (0-based) waits 100–200 ms, 200–400 ms, 400–800 ms … with the defaults.
 */
export function backoffMs(policy: RetryPolicy, retry: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/** `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, in milliseconds from `now`. */
export function parseRetryAfter(header: string | null, now: number = Date.now()): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
