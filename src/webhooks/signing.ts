import { createHmac, randomBytes } from 'node:crypto';

// Standard Webhooks (https://www.standardwebhooks.com/): what a receiver's library verifies.

const SECRET_PREFIX = 'whsec_';
/** 24 random bytes: the size Standard Webhooks' reference libraries generate (192 bits). */
const SECRET_BYTES = 24;

/** A new signing secret, `whsec_<base64 of 24 random bytes>`, shown to its owner once. */
export function newWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The key bytes of a secret: the base64 after `whsec_` (the prefix is not part of the key). */
function keyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

export interface SignedHeaders {
  readonly 'webhook-id': string;
  readonly 'webhook-timestamp': string;
  readonly 'webhook-signature': string;
}

/**
 * The three headers of a signed delivery: `webhook-signature` is `v1,` and the base64
 * HMAC-SHA256 of `<id>.<timestamp>.<body>` under the secret's decoded bytes. The id is the same
 * on every retry of one event to one webhook, so a receiver can drop duplicates by it. With several
 * secrets (a rotation's overlap: the new one first), one signature each, space-separated, as
 * Standard Webhooks says: a receiver holding any one of them verifies.
 */
export function signDelivery(
  secret: string | readonly string[],
  id: string,
  timestampSeconds: number,
  body: string,
): SignedHeaders {
  const timestamp = String(Math.floor(timestampSeconds));
  const signatures = (typeof secret === 'string' ? [secret] : secret).map(
    (s) => `v1,${createHmac('sha256', keyOf(s)).update(`${id}.${timestamp}.${body}`).digest('base64')}`,
  );
  return { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signatures.join(' ') };
}
