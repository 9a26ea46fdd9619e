import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { HttpError } from '../errors.js';
import { errorResponses } from '../http/responses.js';
import { parseDecimalBigInt } from '../http/validation.js';
import { type EventStore, failureFields } from '../store/store.js';
import { bearerCredential } from '../auth/authenticate.js';
import { EventStream } from './event-stream.js';
import { type EventStreams, reconnectionTime } from './event-streams.js';
import { EventTail } from './event-tail.js';
import { reconnectLater, startStream } from './stream-response.js';

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
    'Server-Sent Events: each event of the plants the caller may see, as `id`, `event` (its type) and `data` (its payload), live as changes commit, with a comment line at least every 15 s. Without `Last-Event-ID` or `?after=` the stream starts from now; with one it resumes strictly after that event (`?after=0`: every event kept). An id older than the retention answers 410. At most 5 open streams per token.',
  tags: ['events'],
  security: [{ bearerAuth: [] }],
  querystring: Type.Object({
    after: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,19}$', description: 'resume after this event id', examples: ['0'] }),
    ),
  }),
  'x-request-headers': {
    'Last-Event-ID': {
      description: 'the id of the last event received: the stream resumes after it (wins over `?after=`)',
      schema: { type: 'string' },
      example: '0',
    },
  },
  response: {
    200: {
      description: 'A text/event-stream that stays open',
      content: {
        'text/event-stream': {
          schema: { type: 'string' },
          example:
            ': connected\n\nid: 1\nevent: plant.created\ndata: {"id":42,"name":"Monstera","tag":"tropical"}\n\n' +
            'id: 2\nevent: plant.deleted\ndata: {"id":42}\n\n',
        },
      },
    },
    ...errorResponses(400, 401, 403, 408, 410, 429, 431, 500, 503),
  },
};

/** GET /events: the change feed (CONTRACT.md, Events). */
export function eventRoutes(
  store: EventStore,
  options: EventFeedOptions,
  registry: EventStreams,
): FastifyPluginAsyncTypebox {
  return async (app) => {
    const tail = new EventTail(store, options.heartbeatMs, (error) =>
      app.log.warn(failureFields(error), 'change feed: could not read the event log; trying again'),
    );
    registry.useTail(tail);
    app.addHook('preClose', (done) => {
      registry.endAll();
      tail.close();
      done();
    });

    app.get(
      '/events',
      { schema: eventFeedSchema, config: { scope: 'plants:read' }, exposeHeadRoute: false },
      async (request, reply) => {
        const { principal } = request;
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
        // A client that leaves while its stream is set up frees its place at once (issue 23): an
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
        // The streams were ended while this one was set up: it would hold the shutdown open (issue 23).
        if (registry.closing) {
          place.release();
          return reconnectLater(request, reply);
        }
        const raw = startStream(request, reply);
        const owner = principal.scopes.has('plants:admin') ? null : principal.subject;
        const stream = new EventStream(raw, store, owner, after, () => {
          registry.delete(stream);
          tail.unsubscribe(stream);
          place.release();
        });
        registry.add(stream, bearerCredential(request.headers.authorization));
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
