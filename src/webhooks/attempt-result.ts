import type { WebhookAttempt } from './sender.js';

/**
 * What one attempt came to, as plant_store_webhook_attempts_total{result} counts it
 * (docs/monitoring.md): `delivered` (a 2xx, or a broker's acknowledgement), `http_error` (the receiver answered anything else),
 * `refused` (the address policy refused the target: nothing sent), `network_error` (no answer:
 * connection, DNS, TLS, timeout, a broker's refusal, or nothing could be sent, e.g. a secret that does not open).
 */
export type AttemptResultKind = 'delivered' | 'http_error' | 'network_error' | 'refused';

export const ATTEMPT_RESULT_KINDS: readonly AttemptResultKind[] = [
  'delivered',
  'http_error',
  'network_error',
  'refused',
];

export function attemptResultKind(result: WebhookAttempt): AttemptResultKind {
  if (result.refused === true) return 'refused';
  if (result.accepted === true && result.error === undefined) return 'delivered';
  if (result.status === undefined) return 'network_error';
  // A 2xx whose body outlived the deadline is not delivered (outcomeOf): the receiver answered, but not in time.
  return result.error === undefined && result.status >= 200 && result.status < 300 ? 'delivered' : 'http_error';
}
