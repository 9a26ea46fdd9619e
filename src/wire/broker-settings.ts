// BROKERS (docs/settings.md#brokers): the message brokers a webhook may publish to, named by the
// operator, each with the one subject prefix (NATS) or exchange (RabbitMQ) its destinations may use.

export type BrokerKind = 'nats' | 'amqp';

export interface BrokerSetting {
  /** The name a destination gives (`{"broker": "<name>", …}`). */
  readonly name: string;
  readonly kind: BrokerKind;
  /** The URL the client connects with, credentials included, `allow` removed. Never logged. */
  readonly url: string;
  /** The URL as logs and answers may show it: the password replaced by `***`. */
  readonly shown: string;
  /** NATS: the subject prefix (the prefix itself, or the prefix then `.` then anything). RabbitMQ: the exchange. */
  readonly allow: string;
}

export class BrokerSettingError extends Error {
  override name = 'BrokerSettingError';
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** A NATS subject a destination may publish to: tokens of visible ASCII but `*`, `>` and `.`, joined by `.`. */
const SUBJECT = /^[!-)+-\-/-=?-~]+(\.[!-)+-\-/-=?-~]+)*$/;
const EXAMPLE = 'events=nats://127.0.0.1:4222?allow=plants,bus=amqp://user:pass@127.0.0.1:5672/?allow=plants';

/** The URL with its password replaced by `***`: what a log line or an error message may show. */
export function shownUrl(url: URL): string {
  if (url.password === '') return url.href;
  const copy = new URL(url.href);
  copy.password = '***';
  return copy.href;
}

/** `name=url,name=url`; an empty or absent text names none. Throws BrokerSettingError, never echoing a password. */
export function parseBrokers(text: string | undefined): BrokerSetting[] {
  if (text === undefined || text.trim() === '') return [];
  const brokers: BrokerSetting[] = [];
  for (const item of text.split(',')) {
    const at = item.indexOf('=');
    const name = item.slice(0, at).trim();
    if (at < 0 || !NAME.test(name)) {
      throw new BrokerSettingError(`BROKERS must be name=url pairs separated by commas, such as ${EXAMPLE}`);
    }
    if (brokers.some((b) => b.name === name)) throw new BrokerSettingError(`BROKERS names "${name}" twice`);
    let url: URL;
    try {
      url = new URL(item.slice(at + 1).trim());
    } catch {
      throw new BrokerSettingError(`BROKERS: the URL of "${name}" is not a URL`);
    }
    const shown = shownUrl(url);
    const kind: BrokerKind | undefined =
      url.protocol === 'nats:' ? 'nats' : url.protocol === 'amqp:' ? 'amqp' : undefined;
    if (kind === undefined) {
      throw new BrokerSettingError(`BROKERS: "${name}" must be a nats:// or amqp:// URL; got ${shown}`);
    }
    const allow = url.searchParams.get('allow') ?? '';
    if (kind === 'nats' ? !SUBJECT.test(allow) : allow === '' || allow.length > 255) {
      throw new BrokerSettingError(
        `BROKERS: "${name}" needs ?allow= with ${kind === 'nats' ? 'the subject prefix (such as plants or acme.plants; no * or >)' : 'the exchange its destinations publish to'}; got ${shown}`,
      );
    }
    url.searchParams.delete('allow');
    if (url.hostname === '') throw new BrokerSettingError(`BROKERS: "${name}" has no host; got ${shown}`);
    brokers.push({ name, kind, url: url.href, shown: shownUrl(url), allow });
  }
  return brokers;
}

/** Whether `subject` is a NATS subject a publisher may use (no wildcard). */
export const isSubject = (subject: string): boolean => subject.length <= 255 && SUBJECT.test(subject);

/** Whether `subject` is `allow` itself or `allow.` then more. */
export const subjectAllowed = (subject: string, allow: string): boolean =>
  isSubject(subject) && (subject === allow || subject.startsWith(`${allow}.`));
