import { parseDuration } from '../config.js';
import { parseDecimalBigInt } from '../wire/int64.js';
import { EVENT_TYPES, type EventType } from '../store/event-store.js';
import type { WebhookService } from '../webhooks/webhook.service.js';
import type { WebhookPatchBody } from '../webhooks/webhook.schema.js';
import { OVERLAP_MAX_SECONDS } from '../webhooks/secret-overlap.js';
import { parseCommand } from './args.js';
import { formatCount } from '../transfer/progress.js';
import { UsageError, err, out, table } from './output.js';
import { DESTINATION_OPTIONS, destinationOption, destinationText } from './destination-option.js';

// `plant-store webhooks update|rotate|ping|recover|attempts`: interface 1.2.0's webhook management,
// through the same WebhookService as the HTTP API, for any subject's webhook (an operator's view).

export const MANAGE_COMMANDS = ['update', 'rotate', 'ping', 'recover', 'attempts'] as const;
type ManageCommand = (typeof MANAGE_COMMANDS)[number];

export const isManageCommand = (sub: string | undefined): sub is ManageCommand =>
  (MANAGE_COMMANDS as readonly string[]).includes(sub ?? '');

/** JSON with int64 ids as JSON integers, digit for digit. */
const toJson = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `\u0000${v}\u0000` : v)).replace(
    /"\\u0000(-?\d+)\\u0000"/g,
    '$1',
  );

function oneId(positionals: string[], command: string, what = 'one webhook id'): string {
  if (positionals.length !== 1)
    throw new UsageError(`${command} takes ${what} (plant-store webhooks list shows them)`, command);
  return positionals[0]!;
}

function parseEvents(text: string, command: string): EventType[] {
  const events = text.split(',').map((e) => e.trim());
  const unknown = events.filter((e) => !(EVENT_TYPES as readonly string[]).includes(e));
  if (unknown.length > 0) {
    throw new UsageError(
      `--events takes one or more of ${EVENT_TYPES.join(',')}, comma-separated; unknown: ${unknown.join(', ')}`,
      command,
    );
  }
  return events as EventType[];
}

function parseOverlap(text: string | undefined, command: string): number | undefined {
  if (text === undefined) return undefined;
  const ms = /^0+(?:ms|s|m|h|d)?$/.test(text.trim()) ? 0 : parseDuration(text);
  if (ms === undefined || ms % 1000 !== 0 || ms / 1000 > OVERLAP_MAX_SECONDS) {
    throw new UsageError(
      `--overlap takes a duration from 0 to ${OVERLAP_MAX_SECONDS / 86_400}d in whole seconds, such as 24h, 90m or 0`,
      command,
    );
  }
  return ms / 1000;
}

/** Runs one of MANAGE_COMMANDS; HttpErrors (a 404, a refused URL) go to the caller, which prints them. */
export async function manageCommand(
  sub: ManageCommand,
  args: string[],
  withService: <T>(run: (service: WebhookService) => Promise<T>) => Promise<T>,
): Promise<number> {
  const command = `webhooks ${sub}`;
  switch (sub) {
    case 'update': {
      const { values, positionals } = parseCommand(
        command,
        args,
        {
          url: 'string',
          ...DESTINATION_OPTIONS,
          events: 'string',
          description: 'string',
          status: 'string',
          json: 'boolean',
        },
        { positionals: true },
      );
      const id = oneId(positionals, command);
      if (values.status !== undefined && values.status !== 'active' && values.status !== 'disabled') {
        throw new UsageError('--status takes active or disabled', command);
      }
      const destination = destinationOption(values, command);
      const patch: WebhookPatchBody = {
        ...(values.url !== undefined && { url: values.url }),
        ...(destination !== undefined && { destination }),
        ...(values.events !== undefined && { events: parseEvents(values.events, command) }),
        ...(values.description !== undefined && { description: values.description }),
        ...(values.status !== undefined && { status: values.status }),
      };
      if (Object.keys(patch).length === 0) {
        throw new UsageError(
          `${command} needs at least one of --url, --broker with --broker-subject or --routing-key, --events, --description, --status`,
          command,
        );
      }
      const webhook = await withService((service) => service.update(null, id, patch));
      if (values.json) out(toJson(webhook));
      else {
        const target = webhook.url ?? destinationText(webhook.destination);
        err(`Updated webhook ${id}: ${target} (${webhook.events.join(',')}), ${webhook.status}.`);
      }
      return 0;
    }
    case 'rotate': {
      const { values, positionals } = parseCommand(
        command,
        args,
        { overlap: 'string', json: 'boolean' },
        { positionals: true },
      );
      const id = oneId(positionals, command);
      const overlap = parseOverlap(values.overlap, command);
      const rotated = await withService((service) => service.rotateSecret(null, id, overlap));
      if (values.json) {
        out(toJson(rotated));
        return 0;
      }
      out(rotated.secret); // alone on stdout, as `webhooks add` prints it
      err(
        overlap === 0
          ? `Rotated the secret of webhook ${id}: only the new one signs from now on. Copy it now: it cannot be shown again.`
          : `Rotated the secret of webhook ${id}: the old one signs beside it for ${values.overlap ?? '24h'}. Copy it now: it cannot be shown again.`,
      );
      return 0;
    }
    case 'ping': {
      const { values, positionals } = parseCommand(command, args, { json: 'boolean' }, { positionals: true });
      const id = oneId(positionals, command);
      const ping = await withService((service) => service.ping(null, id));
      if (values.json) out(toJson(ping));
      else
        err(`Ping ${ping.id} of webhook ${id} will be sent now; see: plant-store webhooks attempts ${id} ${ping.id}`);
      return 0;
    }
    case 'recover': {
      const { values, positionals } = parseCommand(
        command,
        args,
        { since: 'string', json: 'boolean' },
        { positionals: true },
      );
      const id = oneId(positionals, command);
      if (values.since === undefined)
        throw new UsageError(`${command} needs --since <RFC 3339 time>, such as 2025-03-01T06:00:00Z`, command);
      const since = values.since;
      // A long recover says how it goes on stderr (every few seconds), whatever --json asks of stdout.
      const progress = (done: { requeued: number; created: number }, elapsedMs: number): void =>
        err(
          `recover of webhook ${id}: ${formatCount(done.requeued)} requeued and ${formatCount(done.created)} created so far (${Math.round(elapsedMs / 1000)} s)`,
        );
      const { requeued, created } = await withService((service) => service.recover(null, id, since, { progress }));
      if (values.json) out(toJson({ requeued, created }));
      else
        err(
          `${requeued} failed deliveries of webhook ${id} are pending again; ${created} new ones for the events it was not sent while disabled.`,
        );
      return 0;
    }
    case 'attempts': {
      const { values, positionals } = parseCommand(command, args, { json: 'boolean' }, { positionals: true });
      const deliveryId = positionals.length === 2 ? parseDecimalBigInt(positionals[1]!) : undefined;
      if (deliveryId === undefined) {
        throw new UsageError(
          `${command} takes a webhook id and a delivery id (plant-store webhooks deliveries <webhook-id> shows them)`,
          command,
        );
      }
      const attempts = await withService((service) => service.attempts(null, positionals[0]!, deliveryId));
      if (values.json) out(toJson(attempts));
      else if (attempts.length === 0) err(`Delivery ${deliveryId} has not been attempted yet.`);
      else {
        const oneLine = (text: string | null): string =>
          text === null ? '-' : JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
        const rows = attempts.map((a) => [
          String(a.attempt),
          a.at,
          a.status === null ? '-' : String(a.status),
          String(a.durationMs),
          a.error ?? '-',
          oneLine(a.response),
        ]);
        out(table([['ATTEMPT', 'AT', 'STATUS', 'MS', 'ERROR', 'RESPONSE'], ...rows]));
      }
      return 0;
    }
  }
}
