import type { FastifyReply } from 'fastify';
import Type from '#typebox';
import { HttpError } from '../errors.js';
import { negotiateMediaType } from '../http/accept.js';
import { parseDecimalBigInt } from '../wire/int64.js';
import { EXAMPLE_PLANT, Int64 } from '../wire/schemas.js';
import { EVENT_TYPES, type EventRow, type EventStore, type EventType } from '../store/event-store.js';
import { type TypeFilter, typesQueryText } from './event-types-query.js';

// The change feed as pages of JSON (interface 1.2.0; docs/api.md#the-change-feed), for pollers and
// scripts: the same events as the stream, by `?after=`, `?limit=` and `?types=`, each page linking
// to the next.

export const PAGE_LIMIT = { min: 1, max: 1000, default: 100 } as const;

export const STREAM = 'text/event-stream';
export const JSON_PAGES = 'application/json';

/**
 * The stream stays the default (the 1.1.0 answer): a client that sends no Accept, `*\/*` (curl),
 * or nothing this resource has, keeps getting it; JSON when Accept prefers it (docs/decisions.md).
 */
export const wantsPages = (accept: string | undefined): boolean =>
  negotiateMediaType(accept, [STREAM, JSON_PAGES]) === JSON_PAGES;

/** One item of a page: what the stream sends as id, event and data, plus when it was committed. */
export const EventItem = Type.Object(
  {
    id: Int64,
    type: Type.Unsafe<EventType>({ type: 'string', enum: [...EVENT_TYPES], description: 'the event type' }),
    data: Type.Object(
      { id: Int64, name: Type.Optional(Type.String()), tag: Type.Optional(Type.String()) },
      {
        additionalProperties: false,
        description:
          'the payload, exactly as on the stream and in webhooks: the `NewPlant` for plant.created (`tag` only when the plant has one), `{"id"}` for plant.deleted',
      },
    ),
    createdAt: Type.String({ format: 'date-time', description: 'when the change committed (RFC 3339, UTC)' }),
  },
  {
    additionalProperties: false,
    description: 'An event of the change feed; `id` orders them.',
    examples: [{ id: 1, type: 'plant.created', data: EXAMPLE_PLANT, createdAt: '2026-01-01T00:00:00.000Z' }],
  },
);

export interface PageQuery {
  readonly after?: string | undefined;
  readonly limit?: number | undefined;
}

/** The JSON text of each type (a closed set: no escaping at run time). */
const TYPE_JSON = new Map<string, string>(EVENT_TYPES.map((t) => [t, JSON.stringify(t)]));

/**
 * The page as JSON text, built from the stored text: `data` is the payload as written (ids beyond
 * 2^53 exact, never parsed), ids are the digits the store read. Events of one millisecond share
 * their time's text (a burst of commits is made of them).
 */
export function pageJson(rows: readonly EventRow[]): string {
  let json = '[';
  let ms = Number.NaN;
  let at = '';
  for (let i = 0; i < rows.length; i++) {
    const [id, type, payload, createdAt] = rows[i]!;
    if (createdAt !== ms) at = new Date((ms = createdAt)).toISOString();
    const typeJson = TYPE_JSON.get(type) ?? JSON.stringify(type);
    json += `${i === 0 ? '{' : ',{'}"id":${id},"type":${typeJson},"data":${payload},"createdAt":"${at}"}`;
  }
  return `${json}]`;
}

/** RFC 8288: the next page starts after the last event of this one (or where this one started). */
export function nextPageLink(after: bigint, limit: number, types: TypeFilter): string {
  const only = typesQueryText(types);
  return `</events?after=${after}&limit=${limit}${only === undefined ? '' : `&types=${only}`}>; rel="next"`;
}

/**
 * Answers one page. Without `?after=` it starts at the oldest event kept. The log is read first
 * and the retention checked after: an event pruned between the two cannot go missing unnoticed.
 */
export async function sendPage(
  reply: FastifyReply,
  store: EventStore,
  /** Whose plants' events the caller may see; null: every plant's (plants:admin). */
  owner: string | null,
  query: PageQuery,
  types: TypeFilter,
): Promise<FastifyReply> {
  const limit = query.limit ?? PAGE_LIMIT.default;
  const asked = query.after === undefined ? undefined : parseDecimalBigInt(query.after);
  if (query.after !== undefined && (asked === undefined || asked < 0n)) {
    throw new HttpError(400, '?after= must be an event id: a whole number from 0');
  }
  const after = asked ?? (await store.eventHorizon());
  const rows = await store.readEventRows(after, owner, limit, types === null ? null : [...types]);
  if (asked !== undefined && asked < (await store.eventHorizon())) {
    throw new HttpError(
      410,
      `events after ${asked} are past the retention; read the plants again, then poll from the oldest event kept (no ?after=)`,
    );
  }
  const last = rows.length === 0 ? after : BigInt(rows[rows.length - 1]![0]);
  // A prebuilt string with a JSON type goes out as it is: Fastify's serializer never sees it.
  return reply
    .header('link', nextPageLink(last, limit, types))
    .type('application/json; charset=utf-8')
    .send(pageJson(rows));
}
