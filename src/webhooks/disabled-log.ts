import type { FastifyBaseLogger } from 'fastify';
import type { DisabledReason, WebhookRecord } from '../store/webhook-store.js';

const WHY: Readonly<Record<DisabledReason, string>> = {
  gone: 'the receiver answered 410 Gone',
  failing: 'every attempt failed for 5 days',
  manual: 'its owner disabled it',
};

/**
 * The one `warn` line of a webhook disabled (docs/api.md#delivery): which, whose and why. Of its
 * URL only the origin: receivers' URLs often carry a credential in the path or the query (a
 * Slack-style /services/T…/B…/secret), and the id names the webhook anyway.
 */
export function logDisabled(
  log: Pick<FastifyBaseLogger, 'warn'>,
  webhook: Pick<WebhookRecord, 'id' | 'owner' | 'url'>,
  reason: DisabledReason,
): void {
  let origin: string;
  try {
    origin = new URL(webhook.url).origin;
  } catch {
    origin = '(unparsable URL)';
  }
  log.warn(
    { webhook: webhook.id, owner: webhook.owner, reason, origin },
    `webhook ${webhook.id} of ${webhook.owner} disabled: ${WHY[reason]}`,
  );
}
