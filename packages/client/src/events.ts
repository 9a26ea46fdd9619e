import {
  EVENT_LIMIT,
  EVENT_SHAPES,
  EVENT_TYPES,
  type EventTicket,
  type EventType,
  type EventsQueryName,
  type FeedEvent,
} from './contract.js';
import { parseExactJson } from './exact-json.js';
import { type Int64, toInt64 } from './int64.js';
import { nextLinkTarget } from './link.js';
import { readShaped } from './shape.js';
import { type Answer, unexpected } from './wire.js';

/** Where a page of the change feed starts, and what it holds. */
export interface EventsPageOptions {
  /** Events after this id (an event's `id`); left out: from the oldest event the server keeps. */
  after?: Int64;
  /** Events per page (per request), 1 to 1000; the server's default is 100. */
  limit?: number;
  /** Only events of these types; left out: every type. */
  types?: readonly EventType[];
  signal?: AbortSignal;
}

export interface EventsPage {
  readonly events: FeedEvent[];
  /** Where the next page starts: the last event's id, or the same `after` when this page is empty. */
  readonly next: bigint;
}

/** The GET /events query; its names are the ones OPERATIONS.streamEvents lists. */
export function eventsQuery({ after, limit, types }: EventsPageOptions): URLSearchParams {
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= EVENT_LIMIT.min && limit <= EVENT_LIMIT.max)) {
    throw new RangeError(`limit must be an integer from ${EVENT_LIMIT.min} to ${EVENT_LIMIT.max}`);
  }
  let from: bigint | undefined;
  if (after !== undefined) {
    from = toInt64(after);
    if (from < 0n) throw new RangeError('after must be an event id: 0 or more');
  }
  if (types !== undefined) {
    if (!Array.isArray(types) || types.length === 0)
      throw new TypeError('types must be a non-empty array of event types');
    for (const type of types) {
      if (!(EVENT_TYPES as readonly unknown[]).includes(type)) {
        throw new RangeError(`unknown event type ${JSON.stringify(type)}: the types are ${EVENT_TYPES.join(', ')}`);
      }
    }
  }
  const values: Record<EventsQueryName, string | undefined> = {
    after: from?.toString(),
    types: types?.join(','),
    limit: limit?.toString(),
  };
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined) query.set(name, value);
  return query;
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const optionalString = (value: unknown): boolean => value === undefined || typeof value === 'string';

/** One item of a page, checked and copied to exactly the fields of FeedEvent; undefined when it does not fit. */
function readEvent(item: unknown): FeedEvent | undefined {
  if (!isObject(item) || typeof item.id !== 'bigint' || typeof item.createdAt !== 'string') return undefined;
  const { id, type, data, createdAt } = item;
  if (!isObject(data) || typeof data.id !== 'bigint') return undefined;
  if (type === 'plant.deleted') return { id, type, data: { id: data.id }, createdAt };
  if (type !== 'plant.created' || typeof data.name !== 'string' || !optionalString(data.tag)) return undefined;
  const plant =
    data.tag === undefined
      ? { id: data.id, name: data.name }
      : { id: data.id, name: data.name, tag: data.tag as string };
  return { id, type, data: plant, createdAt };
}

/** The events of a page, every id exact; types this client does not know yet are skipped. */
export function readEventsPage(answer: Answer): FeedEvent[] {
  let body: unknown;
  try {
    body = parseExactJson(answer.text);
  } catch {
    return unexpected(answer, 'its body is not JSON');
  }
  if (!Array.isArray(body)) return unexpected(answer, 'its body is not an array of events');
  const events: FeedEvent[] = [];
  for (const item of body) {
    // A type added to the API later (an additive change) is not one of FeedEvent's: left out.
    if (isObject(item) && typeof item.type === 'string' && !(EVENT_TYPES as readonly string[]).includes(item.type)) {
      continue;
    }
    events.push(readEvent(item) ?? unexpected(answer, 'an item is not an event'));
  }
  return events;
}

/** The `after` of the `rel="next"` link: every page has one. */
export function nextAfter(answer: Answer): bigint {
  const target = nextLinkTarget(answer.headers.get('link'));
  if (target === undefined) return unexpected(answer, 'it has no Link rel="next"');
  const after = new URL(target, 'http://link.invalid/').searchParams.get('after');
  if (after === null || !/^[0-9]{1,19}$/.test(after)) return unexpected(answer, 'its Link rel="next" has no after');
  return BigInt(after);
}

/** The body of POST /events/tickets. */
export function readEventTicket(answer: Answer): EventTicket {
  let value: unknown;
  try {
    value = JSON.parse(answer.text);
  } catch {
    return unexpected(answer, 'its body is not JSON');
  }
  return (
    readShaped<EventTicket>(value, EVENT_SHAPES.EventTicket) ?? unexpected(answer, 'its body is not an EventTicket')
  );
}
