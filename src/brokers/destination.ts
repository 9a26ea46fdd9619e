// A webhook's target is a URL or a destination on a broker BROKERS names (docs/api.md#destinations).
// The store keeps either in the webhook's `url` column: a destination as `broker+nats://<broker>/<subject>`
// or `broker+amqp://<broker>/<routing key>`. Its origin (originOf: scheme and broker name) is then the
// broker's, so the dispatcher's fair shares treat a broker as one receiver.

export type Destination =
  { readonly broker: string; readonly subject: string } | { readonly broker: string; readonly routingKey: string };

const NATS = 'broker+nats://';
const AMQP = 'broker+amqp://';

/** The stored target of a destination. */
export function destinationTarget(destination: Destination): string {
  return 'subject' in destination
    ? `${NATS}${destination.broker}/${destination.subject}`
    : `${AMQP}${destination.broker}/${destination.routingKey}`;
}

/** The destination a stored target names, or null for a URL. */
export function destinationOf(target: string): Destination | null {
  const nats = target.startsWith(NATS);
  if (!nats && !target.startsWith(AMQP)) return null;
  const rest = target.slice(NATS.length);
  const slash = rest.indexOf('/');
  const broker = rest.slice(0, slash);
  const key = rest.slice(slash + 1);
  return nats ? { broker, subject: key } : { broker, routingKey: key };
}

/** The NATS subject or RabbitMQ routing key of a destination. */
export const destinationKey = (destination: Destination): string =>
  'subject' in destination ? destination.subject : destination.routingKey;
