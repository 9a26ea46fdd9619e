import type { EventSettings } from '../config.js';
import type { AttemptOutcome } from '../store/webhook-store.js';
import type { WebhookAttempt } from './sender.js';

/** The longest wait a receiver's Retry-After may ask for (docs/api.md#delivery: "at most 24 h away"). */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/** ±20 % (docs/api.md#delivery), so that many deliveries that failed together do not retry together. */
const jitter = (ms: number, random: () => number): number => Math.round(ms * (0.8 + 0.4 * random()));

/**
 * A Retry-After value as milliseconds from `now`, at most MAX_RETRY_AFTER_MS; undefined when it is
 * not one of the two forms RFC 9110 §10.2.3 and §5.6.7 define (docs/api.md#delivery): delay-seconds,
 * or an IMF-fixdate such as `Sun, 06 Nov 1994 08:49:37 GMT`, a date that exists. `Date.parse` alone
 * is lenient: it read `May 2099` (a wait of 24 h) and ISO 8601 times.
 */
export function retryAfterMs(value: string | undefined, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  let ms: number;
  if (/^\d+$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = IMF_FIXDATE.test(text) ? Date.parse(text) : Number.NaN;
    // toUTCString writes an IMF-fixdate: the same text back means the date exists (no 30 February).
    if (Number.isNaN(at) || new Date(at).toUTCString() !== text) return undefined;
    ms = at - now;
  }
  return Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS);
}

const IMF_FIXDATE =
  /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} GMT$/;

export interface AttemptContext {
  /** The sender's clock, which an HTTP-date Retry-After is read against. */
  readonly now?: number;
  /** False for a ping: attempted once, never retried (docs/decisions.md). */
  readonly retries?: boolean;
}

/**
 * What an attempt means for its delivery and webhook: 2xx (or a broker's acknowledgement) delivered; 410 failed, and the webhook
 * disabled; anything else retried on the schedule, then failed. A 429 or 503 with Retry-After
 * waits at least that long (at most 24 h), the schedule's wait if longer. `attempt` counts from 1
 * in the current schedule (a recover starts it over).
 */
export function outcomeOf(
  attempt: number,
  result: WebhookAttempt,
  settings: Pick<EventSettings, 'retrySchedule' | 'disableAfterFailingMs'>,
  random: () => number = Math.random,
  { now = Date.now(), retries = true }: AttemptContext = {},
): AttemptOutcome {
  const status = result.status ?? null;
  const ok =
    result.error === undefined && (result.accepted === true || (status !== null && status >= 200 && status < 300));
  const common = {
    lastStatus: status,
    disableWhenFailingForMs: settings.disableAfterFailingMs,
    durationMs: result.durationMs,
    response: result.responseSnippet ?? null,
  };
  if (ok) return { ...common, status: 'delivered', lastError: null, retryInMs: null, healthy: true, disable: null };
  const lastError = result.error ?? `the receiver answered ${status}`;
  const failed = { ...common, status: 'failed', lastError, retryInMs: null, healthy: false } as const;
  if (status === 410) return { ...failed, disable: 'gone' };
  const wait = retries ? settings.retrySchedule[attempt] : undefined; // the wait before attempt + 1
  if (wait === undefined) return { ...failed, disable: null }; // the schedule's last: Retry-After cannot extend it
  const asked = status === 429 || status === 503 ? retryAfterMs(result.retryAfter, now) : undefined;
  const retryInMs = Math.max(jitter(wait, random), asked ?? 0);
  return { ...common, status: 'pending', lastError, retryInMs, healthy: false, disable: null };
}
