import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from '#typebox';
import { HttpError } from '../errors.js';
import { varyOnAccept } from '../http/accept.js';
import type { ApiPart } from '../http/openapi.js';
import { errorResponses } from '../http/responses.js';
import { parseDecimalBigInt } from '../wire/int64.js';
import { failureFields } from '../store/store.js';
import { EVENT_TYPES, type EventStore } from '../store/event-store.js';
import { EventItem, JSON_PAGES, PAGE_LIMIT, STREAM, sendPage, wantsPages } from './event-pages.js';
import { bearerCredential } from '../auth/authenticate.js';
import { EventStream } from './event-stream.js';
import { type EventStreams, reconnectionTime } from './event-streams.js';
import { EventTail } from './event-tail.js';
import { type EventTickets, TICKET_LIFETIME_MS, ticketHolderOf } from './event-tickets.js';
import { parseTypesQuery } from './event-types-query.js';
import { chunkedBody, reconnectLater, startStream } from './stream-response.js';

/** What the change feed adds to the OpenAPI document besides its route (http/openapi.ts). */
export const EVENTS_API: ApiPart = {
  tags: [{ name: 'events', description: 'The change feed: every change, live, as Server-Sent Events.' }],
};

export interface EventFeedOptions {
  readonly heartbeatMs: number;
  readonly maxStreamsPerToken: number;
}

/**
 * Last-Event-ID (what a browser's EventSource sends on reconnect) wins over ?after=; with neither,
 * undefined: the stream starts from now.
 */
function resumeAfter(header: string | string[] | undefined, query: string | undefined): bigint | undefined {
  const text = typeof header === 'string' ? header.trim() : query;
  if (text === undefined || text === '') return undefined;
  const id = /^[0-9]{1,19}$/.test(text) ? parseDecimalBigInt(text) : undefined;
  if (id === undefined || id > 9223372036854775807n) {
    throw new HttpError(400, 'Last-Event-ID and ?after= must be an event id: a whole number from 0');
  }
  return id;
}

export const eventFeedSchema = {
  operationId: 'streamEvents',
  summary: 'The change feed',
  description:
    'Two representations of the events of the plants the caller may see, chosen by `Accept`. ' +
    '**The stream** (`text/event-stream`, the default: no `Accept`, `*/*`, or anything that does not prefer JSON): Server-Sent Events, each event as `id`, `event` (its type) and `data` (its payload), live as changes commit, with a comment line at least every 15 s. Without `Last-Event-ID` or `?after=` the stream starts from now; with one it resumes strictly after that event (`?after=0`: every event kept). At most 5 open streams per token. ' +
    '**Pages of JSON** (`Accept: application/json`, for pollers): the events after `?after=` (without it: from the oldest event kept), in id order, at most `?limit=`; every page, an empty one too, carries `Link: <…>; rel="next"` whose `after` is the last id of the page (or the same `after` when it is empty): follow it forever. ' +
    '`?types=` keeps only events of those types, on both. An `after` older than the retention answers 410.',
  tags: ['events'],
  // A bearer token, or (a stream only) a ticket in the query: `?ticket=`.
  security: [{ bearerAuth: [] }, { eventTicket: [] }] as Array<Record<string, string[]>>,
  querystring: Type.Object({
    after: Type.Optional(
      Type.String({
        pattern: '^[0-9]{1,19}$',
        description:
          'an event id: the stream resumes after it; a page starts after it (without it: the oldest event kept)',
        examples: ['0'],
      }),
    ),
    types: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: `event types separated by commas (${EVENT_TYPES.join(', ')}): only events of those types`,
        examples: ['plant.created,plant.deleted'],
      }),
    ),
    limit: Type.Optional(
      Type.Integer({
        format: 'int32',
        minimum: PAGE_LIMIT.min,
        maximum: PAGE_LIMIT.max,
        default: PAGE_LIMIT.default,
        description: `an integer from ${PAGE_LIMIT.min} to ${PAGE_LIMIT.max}: how many events a JSON page holds at most (the stream ignores it)`,
        examples: [100],
      }),
    ),
  }),
  'x-request-headers': {
    'Last-Event-ID': {
      description:
        'the id of the last event received: the stream resumes after it (wins over `?after=`; pages ignore it)',
      schema: { type: 'string' },
      example: '0',
    },
  },
  'x-response-headers': {
    Link: {
      description:
        'JSON pages only, on every page: RFC 8288 link to the next page, `</events?after=<last id of this page>&limit=…>; rel="next"` (the same `after` when the page is empty)',
      schema: { type: 'string' },
      example: '</events?after=2&limit=100>; rel="next"',
    },
    Vary: {
      description: '`Accept` (the representation depends on it), and more where compression or CORS apply',
      schema: { type: 'string' },
      example: 'accept',
    },
  },
  response: {
    200: {
      description: 'A text/event-stream that stays open (the default), or a page of events as JSON (by `Accept`)',
      content: {
        [STREAM]: {
          schema: { type: 'string' },
          example:
            ': connected\nretry: 1500\n\nid: 1\nevent: plant.created\ndata: {"id":42,"name":"Monstera","tag":"tropical"}\n\n' +
            'id: 2\nevent: plant.deleted\ndata: {"id":42}\n\n',
        },
        [JSON_PAGES]: {
          schema: Type.Array(EventItem),
          example: [
            {
              id: 1,
              type: 'plant.created',
              data: { id: 42, name: 'Monstera', tag: 'tropical' },
              createdAt: '2026-01-01T00:00:00.000Z',
            },
            { id: 2, type: 'plant.deleted', data: { id: 42 }, createdAt: '2026-01-01T00:00:05.000Z' },
          ],
        },
      },
    },
    ...errorResponses(400, 401, 403, 408, 410, 429, 431, 500, 503),
  },
};

export const ticketSchema = {
  operationId: 'createEventTicket',
  summary: 'A ticket that opens one stream',
  description:
    `A single-use ticket for \`GET /events?ticket=<ticket>\`, valid ${TICKET_LIFETIME_MS / 1000} s: what a browser's own \`EventSource\`, which cannot send \`Authorization\`, opens the stream with. ` +
    'The stream acts as the token that asked for the ticket, follows the same rules as any other (at most 5 per token, ending with its token) and spends the ticket; to resume it after it ends, ask for a fresh ticket and pass `?after=<the last id received>`. ' +
    'A ticket is refused once its token is revoked or expired, and never appears in the logs. No request body.',
  tags: ['events'],
  security: [{ bearerAuth: [] }],
  response: {
    201: {
      description: 'The ticket, and when it can no longer be spent',
      ...Type.Object(
        {
          ticket: Type.String({
            description: 'the ticket: `?ticket=` of one `GET /events` stream; a secret while it lasts',
            examples: ['pse_yF3pO8qX0b4mS1tN6vW2cE9kR5aH7jL0dG3uI8zQ4xB'],
          }),
          expiresAt: Type.String({
            format: 'date-time',
            description: 'RFC 3339, UTC: when the ticket can no longer open a stream (60 s after it was made)',
            examples: ['2026-01-01T00:01:00.000Z'],
          }),
        },
        {
          additionalProperties: false,
          examples: [
            { ticket: 'pse_yF3pO8qX0b4mS1tN6vW2cE9kR5aH7jL0dG3uI8zQ4xB', expiresAt: '2026-01-01T00:01:00.000Z' },
          ],
        },
      ),
    },
    ...errorResponses(401, 403, 408, 429, 431, 500, 503),
  },
};

/** GET /events: the change feed (docs/api.md#the-change-feed). */
export function eventRoutes(
  store: EventStore,
  options: EventFeedOptions,
  registry: EventStreams,
  tickets: EventTickets,
): FastifyPluginAsyncTypebox {
  return async (app) => {
    const tail = new EventTail(
      store,
      options.heartbeatMs,
      (error) => app.log.warn(failureFields(error), 'change feed: could not read the event log; trying again'),
      ['debug', 'trace'].includes(app.log.level)
        ? ({ last, events, streams, ms, cpuMs }) =>
            app.log.debug(
              {
                event: String(last),
                events,
                streams,
                ms: Math.round(ms * 10) / 10,
                cpuMs: Math.round(cpuMs * 10) / 10,
              },
              'change feed: events written to the streams',
            )
        : undefined,
    );
    registry.useTail(tail);
    app.addHook('preClose', (done) => {
      registry.endAll();
      tail.close();
      done();
    });

    app.post('/events/tickets', { schema: ticketSchema, config: { scope: 'plants:read' } }, async (request, reply) => {
      const { ticket, expiresAt } = await tickets.issue(request.principal);
      reply.header('cache-control', 'no-store');
      return reply.code(201).send({ ticket, expiresAt: new Date(expiresAt).toISOString() });
    });

    app.get(
      '/events',
      { schema: eventFeedSchema, config: { scope: 'plants:read' }, exposeHeadRoute: false },
      async (request, reply) => {
        const { principal } = request;
        // One resource, two representations: caches and clients must key on Accept.
        varyOnAccept(reply);
        const types = parseTypesQuery(request.query.types);
        if (wantsPages(request.headers.accept)) {
          const owner = principal.scopes.has('plants:admin') ? null : principal.subject;
          return sendPage(reply, store, owner, request.query, types);
        }
        const asked = resumeAfter(request.headers['last-event-id'], request.query.after);
        if (registry.closing) return reconnectLater(request, reply);
        const place = registry.take(principal.tokenId, options.maxStreamsPerToken);
        if (place === undefined) {
          throw new HttpError(
            429,
            `at most ${options.maxStreamsPerToken} open event streams per token; close one first`,
            { 'retry-after': '5' },
          );
        }
        // A client that leaves while its stream is set up frees its place at once: an
        // EventSource reconnecting over a bad link would otherwise lock its token out.
        const socket = request.raw.socket;
        const leave = (): void => place.release();
        socket.once('close', leave);
        let after: bigint;
        try {
          if (asked !== undefined && asked < (await store.eventHorizon())) {
            throw new HttpError(
              410,
              `events after ${asked} are past the retention; read the plants again, then follow the feed from now`,
            );
          }
          after = asked ?? (await store.lastEventId());
        } catch (error) {
          place.release();
          throw error;
        } finally {
          socket.off('close', leave);
        }
        if (socket.destroyed) {
          place.release();
          return void reply.hijack(); // nobody to answer
        }
        // The streams were ended while this one was set up: it would hold the shutdown open.
        if (registry.closing) {
          place.release();
          return reconnectLater(request, reply);
        }
        const raw = startStream(request, reply);
        const owner = principal.scopes.has('plants:admin') ? null : principal.subject;
        const stream = new EventStream(
          raw,
          store,
          owner,
          after,
          () => {
            registry.delete(stream);
            tail.unsubscribe(stream);
            place.release();
          },
          types,
          chunkedBody(request),
        );
        registry.add(stream, ticketHolderOf(principal) ?? bearerCredential(request.headers.authorization));
        raw.write(`: connected\nretry: ${reconnectionTime()}\n\n`);
        try {
          await tail.subscribe(stream);
          if (stream.isClosed)
            tail.unsubscribe(stream); // the client left while it was being set up
          else await stream.catchUp();
        } catch (error) {
          request.log.warn({ err: error }, 'change feed: a stream failed while catching up; it ends');
          stream.end();
        }
      },
    );
  };
}
