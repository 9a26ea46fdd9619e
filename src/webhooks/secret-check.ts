import type { FastifyBaseLogger } from 'fastify';
import { failureFields } from '../store/store.js';
import { type WebhookRecord, type WebhookStore } from '../store/webhook-store.js';
import { checkWebhookUrl } from './address-policy.js';
import type { SecretBox } from './secret-box.js';

/** The most webhook ids one line names; the count is always whole. */
const MAX_IDS = 50;

/**
 * At start, the stored webhooks read once and checked for what would make every delivery of
 * theirs fail in silence: secrets this SECRETS_KEY cannot open, and targets only
 * WEBHOOK_ALLOW_PRIVATE allows.
 */
export async function checkStoredWebhooks(
  store: Pick<WebhookStore, 'listWebhooks'>,
  box: SecretBox,
  allowPrivate: boolean,
  log: FastifyBaseLogger,
): Promise<void> {
  let webhooks;
  try {
    webhooks = await store.listWebhooks(null);
  } catch (error) {
    log.warn(failureFields(error), 'could not read the webhooks to check their secrets and targets at start');
    return;
  }
  checkStoredSecrets(webhooks, box, log);
  checkPrivateTargets(webhooks, allowPrivate, log);
}

/**
 * At start, every stored webhook secret is opened once with this SECRETS_KEY (docs/api.md#delivery,
 * "Secrets at rest"): a key that was lost, changed or left unset shows as one `error` line naming
 * how many webhooks and which, before any delivery fails for it. Never a secret, nor the key.
 * Secrets stored unencrypted while a key is set (made before it was) still open, and are one `warn`
 * line.
 */
export function checkStoredSecrets(webhooks: readonly WebhookRecord[], box: SecretBox, log: FastifyBaseLogger): void {
  const closed: string[] = [];
  const plain: string[] = [];
  for (const webhook of webhooks) {
    // A rotated-out secret still signs until its overlap ends: it must open too (the clock does not
    // matter here: one that has ended is no longer read, and opening it costs nothing).
    const stored = webhook.previousSecret === null ? [webhook.secret] : [webhook.secret, webhook.previousSecret];
    try {
      for (const secret of stored) box.open(secret, webhook.id);
      if (box.encrypts && stored.some((secret) => !box.isSealed(secret))) plain.push(webhook.id);
    } catch {
      closed.push(webhook.id);
    }
  }
  if (closed.length > 0) {
    log.error(
      { webhooks: closed.length, ids: closed.slice(0, MAX_IDS), secretsKey: box.encrypts ? 'set' : 'not set' },
      box.encrypts
        ? 'webhook secrets do not open with this SECRETS_KEY: their deliveries fail until the key that sealed them is set'
        : 'webhook secrets are encrypted and SECRETS_KEY is not set: their deliveries fail until the key that sealed them is set',
    );
  }
  if (plain.length > 0) {
    log.warn(
      { webhooks: plain.length, ids: plain.slice(0, MAX_IDS) },
      'webhook secrets stored unencrypted though SECRETS_KEY is set (made before it was); a new secret is sealed',
    );
  }
}

/**
 * At start, without WEBHOOK_ALLOW_PRIVATE: the stored webhooks that only that development setting
 * lets be sent to (an `http://` URL, or a private or loopback address written in the URL), in one
 * `warn` line naming how many, which and whose, instead of each of their attempts failing in
 * silence with "the webhook URL must use https". A host name is not resolved here: one
 * that resolves to a private address is refused at its delivery, as always.
 */
export function checkPrivateTargets(
  webhooks: readonly WebhookRecord[],
  allowPrivate: boolean,
  log: FastifyBaseLogger,
): void {
  if (allowPrivate) return;
  const refused = webhooks.filter(
    (w) => !checkWebhookUrl(w.url, { allowPrivate: false }).ok && checkWebhookUrl(w.url, { allowPrivate: true }).ok,
  );
  if (refused.length === 0) return;
  log.warn(
    {
      webhooks: refused.length,
      ids: refused.slice(0, MAX_IDS).map((w) => w.id),
      owners: [...new Set(refused.map((w) => w.owner))].slice(0, MAX_IDS),
    },
    'webhooks with http:// or private targets exist and WEBHOOK_ALLOW_PRIVATE is off: every attempt of theirs fails ' +
      'until their URLs are changed (or, in development only, WEBHOOK_ALLOW_PRIVATE=1)',
  );
}
