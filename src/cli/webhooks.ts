// plant-store webhooks …: every subject's webhooks, straight in the database. The command's input
// is read and checked with light modules only; the webhook service (the URL policy, the schemas,
// the secrets' crypto) and the store load once the command goes to work, so a usage mistake
// answers without them.
import { loadConfig } from '../config.js';
import { io } from './io.js';
import { commandName } from './invocation.js';
import { shellWord } from '../wire/shell.js';
import { parseDecimalBigInt } from '../wire/int64.js';
import type { Store } from '../store/store.js';
import { DESTINATION_OPTIONS, destinationOption, destinationText } from './destination-option.js';
import type { EventType } from '../store/event-store.js';
import { EVENT_TYPES } from '../store/event-store.js';
import type { WebhookService } from '../webhooks/webhook.service.js';
import { parseCommand } from './args.js';
import { isManageCommand, manageCommand } from './webhooks-manage.js';
import { UsageError, err, out, table } from './output.js';
import { DELIVERIES } from './usage.js';

type WithStore = <T>(run: (store: Store) => Promise<T>) => Promise<T>;

function parseEvents(text: string | undefined): EventType[] | undefined {
  if (text === undefined) return undefined;
  const events = text.split(',').map((e) => e.trim());
  const unknown = events.filter((e) => !(EVENT_TYPES as readonly string[]).includes(e));
  if (unknown.length > 0 || events.length === 0) {
    throw new UsageError(
      `--events takes one or more of ${EVENT_TYPES.join(',')}, comma-separated; unknown: ${unknown.join(', ')}`,
      'webhooks add',
    );
  }
  return events as EventType[];
}

function one(positionals: string[], command: string): string {
  if (positionals.length !== 1)
    throw new UsageError(`${command} takes one webhook id (plant-store webhooks list shows them)`, command);
  return positionals[0]!;
}

/** The one webhook id that is all `command` takes. */
const onlyId = (args: string[], command: string): string =>
  one(parseCommand(command, args, {}, { positionals: true }).positionals, command);

/** `plant-store webhooks …`: the operator's view of every subject's webhooks, on the same settings as serve. */
export async function webhooksCommand(sub: string | undefined, args: string[], withStore: WithStore): Promise<number> {
  const config = loadConfig(io().env);
  const withService = async <T>(run: (service: WebhookService) => Promise<T>): Promise<T> => {
    const [{ WebhookService }, { SecretBox }] = await Promise.all([
      import('../webhooks/webhook.service.js'),
      import('../webhooks/secret-box.js'),
    ]);
    return withStore((store) => run(new WebhookService(store, config.events, new SecretBox(config.events.secretsKey))));
  };
  try {
    switch (sub) {
      case 'list': {
        const { values } = parseCommand('webhooks list', args, { subject: 'string', json: 'boolean' });
        const hooks = await withService((service) => service.listWithSubjects(values.subject ?? null));
        if (values.json) out(JSON.stringify(hooks));
        else if (hooks.length === 0)
          err('No webhooks. Add one with: plant-store webhooks add --subject <user> --url <https://…>');
        else
          out(
            table([
              ['ID', 'SUBJECT', 'URL', 'EVENTS', 'STATUS', 'CREATED', 'OLD SECRET SIGNS UNTIL'],
              ...hooks.map((h) => [
                ...[
                  h.id,
                  h.subject,
                  h.url ?? destinationText(h.destination),
                  h.events.join(','),
                  h.status,
                  h.createdAt,
                ],
                h.previousSecretExpiresAt ?? '-',
              ]),
            ]),
          );
        return 0;
      }
      case 'add': {
        const { values } = parseCommand('webhooks add', args, {
          subject: 'string',
          url: 'string',
          ...DESTINATION_OPTIONS,
          events: 'string',
          description: 'string',
          'all-plants': 'boolean',
          json: 'boolean',
        });
        const destination = destinationOption(values, 'webhooks add');
        if (!values.subject || (values.url === undefined) === (destination === undefined))
          throw new UsageError(
            'webhooks add needs --subject <user> and either --url <https://…> or --broker <name> with --broker-subject <subject> or --routing-key <key>',
            'webhooks add',
          );
        const events = parseEvents(values.events);
        const created = await withService((service) =>
          service.create({
            owner: values.subject!,
            allPlants: values['all-plants'] ?? false,
            url: values.url,
            destination,
            events,
            description: values.description,
          }),
        );
        if (values.json) {
          out(JSON.stringify({ ...created, subject: values.subject }));
          return 0;
        }
        out(created.secret); // alone on stdout: SECRET=$(plant-store webhooks add …) works
        err(
          `Created webhook ${created.id} for ${values.subject}: ${created.url ?? destinationText(created.destination)} (${created.events.join(',')}). ` +
            'Copy the signing secret now: it cannot be shown again.',
        );
        return 0;
      }
      case 'remove': {
        const id = onlyId(args, 'webhooks remove');
        await withService((service) => service.remove(null, id));
        err(`Removed webhook ${id}.`);
        return 0;
      }
      case 'enable': {
        const id = onlyId(args, 'webhooks enable');
        await withService((service) => service.enable(null, id));
        err(`Webhook ${id} is active again.`);
        return 0;
      }
      case 'deliveries': {
        const command = 'webhooks deliveries';
        const { values, positionals } = parseCommand(
          command,
          args,
          { limit: 'string', before: 'string', json: 'boolean' },
          { positionals: true },
        );
        const id = one(positionals, command);
        const before = values.before === undefined ? undefined : parseDecimalBigInt(values.before);
        if (values.before !== undefined && (before === undefined || before < 1n)) {
          throw new UsageError(
            '--before takes a delivery id (a whole number): the page starts below it, as the hint after a page says',
            command,
          );
        }
        const given = values.limit;
        const limit = given === undefined ? DELIVERIES.default : /^\d{1,4}$/.test(given) ? Number(given) : 0;
        if (limit < 1 || limit > DELIVERIES.max) {
          throw new UsageError(
            `--limit takes a whole number from 1 to ${DELIVERIES.max}: the newest deliveries to show`,
            command,
          );
        }
        const page = await withService((service) => service.deliveryPage(null, id, limit, before));
        const found = page.deliveries;
        if (values.json) out(JSON.stringify(found, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
        else if (found.length === 0)
          err(
            before === undefined
              ? `Webhook ${id} has no deliveries yet.`
              : `Webhook ${id} has no deliveries below ${before}.`,
          );
        else {
          const rows = found.map((d) => [
            String(d.id),
            d.type,
            d.eventId === null ? '-' : String(d.eventId), // a ping has no event (/portal shows —)
            d.status,
            String(d.attempts),
            d.lastStatus === null ? '-' : String(d.lastStatus),
            d.lastError ?? '-',
            d.nextAttemptAt ?? '-',
          ]);
          out(table([['ID', 'TYPE', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST', 'ERROR', 'NEXT'], ...rows]));
        }
        // On stderr, so that stdout stays the table or the JSON array alone.
        if (page.next !== undefined) {
          const more = values.limit === undefined ? '' : ` --limit ${limit}`;
          err(
            `Older deliveries follow: ${commandName(io().env)} webhooks deliveries ${shellWord(id)}${more} --before ${page.next}${values.json ? ' --json' : ''}`,
          );
        }
        return 0;
      }
      case 'retry': {
        const command = 'webhooks retry';
        const { positionals } = parseCommand(command, args, {}, { positionals: true });
        const deliveryId = positionals.length === 2 ? parseDecimalBigInt(positionals[1]!) : undefined;
        if (deliveryId === undefined) {
          throw new UsageError(
            'webhooks retry takes a webhook id and a delivery id (plant-store webhooks deliveries <webhook-id> shows them)',
            command,
          );
        }
        await withService((service) => service.retry(null, positionals[0]!, deliveryId));
        err(`Delivery ${deliveryId} of webhook ${positionals[0]!} will be sent again.`);
        return 0;
      }
      default:
        if (isManageCommand(sub)) return await manageCommand(sub, args, withService);
        throw new UsageError(
          `unknown webhooks command "${sub ?? ''}": use list, add, remove, deliveries, retry, enable, update, rotate, ping, recover or attempts`,
          'webhooks',
        );
    }
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const [{ HttpError }, { PrivateTargetError }, { allowPrivateHint }] = await Promise.all([
      import('../errors.js'),
      import('../webhooks/webhook.service.js'),
      import('../webhooks/address-policy.js'),
    ]);
    if (!(error instanceof HttpError)) throw error;
    // This command checks the URL in its own process, and the server again before each delivery.
    const hint = allowPrivateHint("WEBHOOK_ALLOW_PRIVATE=1 in this command's environment and the server's");
    err(`plant-store: ${error instanceof PrivateTargetError ? `${error.rule} (${hint})` : error.message}`);
    return 1;
  }
}
