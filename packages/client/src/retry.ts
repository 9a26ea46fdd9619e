/**
 * When and how long to wait before sending a request again. Every operation this client calls is
 * safe to repeat: GET reads, DELETE of a gone plant changes nothing, and the contract makes an
 * identical POST /plants answer 200 with the same plant. So the only question is whether the
 * failure is one that a later attempt can cure.
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
