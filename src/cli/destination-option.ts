// A destination on the command line: `--broker <name>` with `--broker-subject` (NATS) or
// `--routing-key` (RabbitMQ), and how a listing shows one.
import type { Destination } from '../brokers/destination.js';
import { UsageError } from './output.js';

/** `--broker` with `--broker-subject` (NATS) or `--routing-key` (RabbitMQ): a destination; none of them: none. */
/** The options a command that takes a destination adds to its parseCommand spec. */
export const DESTINATION_OPTIONS = {
  broker: 'string',
  'broker-subject': 'string',
  'routing-key': 'string',
} as const;

export function destinationOption(
  values: { broker?: string | undefined; 'broker-subject'?: string | undefined; 'routing-key'?: string | undefined },
  command: string,
): Destination | undefined {
  const { broker, 'broker-subject': subject, 'routing-key': routingKey } = values;
  if (broker === undefined && subject === undefined && routingKey === undefined) return undefined;
  if (broker === undefined || (subject === undefined) === (routingKey === undefined)) {
    throw new UsageError(
      '--broker <name> takes one of --broker-subject <subject> (NATS) or --routing-key <key> (RabbitMQ)',
      command,
    );
  }
  return subject !== undefined ? { broker, subject } : { broker, routingKey: routingKey! };
}

/** A destination as the listing shows it: `nats:<broker>:<subject>` or `amqp:<broker>:<routing key>`. */
export function destinationText(destination: Destination | null): string {
  if (destination === null) return '-';
  return 'subject' in destination
    ? `nats:${destination.broker}:${destination.subject}`
    : `amqp:${destination.broker}:${destination.routingKey}`;
}
