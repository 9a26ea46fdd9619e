import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from '#typebox';
import { requireJson } from '../http/json-body.js';
import type { ApiPart } from '../http/openapi.js';
import { EncodedBodies, Representation, sendRepresentation } from '../http/representation.js';
import { errorResponses } from '../http/responses.js';
import { LIMIT_DEFAULT, ListQuery, NewPlant, Plant, PlantIdParams } from './plant.schema.js';
import type { PlantService } from './plant.service.js';

const security = [{ bearerAuth: [] }];

/** What the plants add to the OpenAPI document besides their routes (http/openapi.ts). */
export const PLANTS_API: ApiPart = {
  tags: [{ name: 'plants', description: "Create, list and delete the caller's plants." }],
  schemas: [
    ['Plant', Plant],
    ['NewPlant', NewPlant],
  ],
};

export const createPlantSchema = {
  operationId: 'addPlant',
  summary: 'Create a plant',
  description:
    'Creates a plant owned by the caller. Sending the same body again is a safe retry and answers 200 with the same plant; an id held by any other plant answers 409.',
  tags: ['plants'],
  security,
  body: NewPlant,
  response: { 200: Plant, ...errorResponses(400, 401, 403, 408, 409, 413, 415, 429, 431, 500, 503) },
};

export const listPlantsSchema = {
  operationId: 'findPlants',
  summary: 'List plants',
  description:
    'The plants the caller has access to (its own; every plant with plants:admin), in ascending id order. When more follow, a `Link: <…>; rel="next"` header points at the next page.',
  tags: ['plants'],
  security,
  querystring: ListQuery,
  'x-response-headers': {
    Link: {
      description:
        'RFC 8288 link to the next page, present when more plants follow: `</plants?limit=…&cursor=…>; rel="next"`',
      schema: { type: 'string' },
    },
    ETag: {
      description:
        'A strong entity tag of exactly the bytes sent (it differs between gzip, br and identity): send it back in `If-None-Match` to poll',
      schema: { type: 'string' },
    },
    Vary: { description: '`Accept-Encoding` (and `Origin` when CORS is on)', schema: { type: 'string' } },
  },
  'x-request-headers': {
    'If-None-Match': {
      description:
        'The `ETag` of a page this client holds (or `*`): when the page is unchanged the answer is 304 with no body',
      schema: { type: 'string' },
    },
  },
  'x-more-responses': {
    304: {
      description:
        'Not Modified: the page is unchanged since the `ETag` sent in `If-None-Match`. No body; `ETag`, `Link` and `Cache-Control` as a 200 would carry them. Authentication and scopes apply first: no token, no 304.',
      headers: {
        ETag: { description: 'the entity tag of the unchanged page', schema: { type: 'string' } },
        Link: { description: 'the next page, as the 200 would give it', schema: { type: 'string' } },
      },
    },
  },
  response: { 200: Type.Array(Plant), ...errorResponses(400, 401, 403, 408, 429, 431, 500, 503) },
};

export const deletePlantSchema = {
  operationId: 'deletePlant',
  summary: 'Delete a plant',
  description:
    "Deletes one of the caller's plants (any plant with plants:admin). A plant the caller cannot reach answers 404, as a missing one does.",
  tags: ['plants'],
  security,
  params: PlantIdParams,
  response: {
    204: Type.Null({ description: 'deleted' }),
    ...errorResponses(400, 401, 403, 404, 408, 429, 431, 500, 503),
  },
};

function nextLink(limit: number, tag: string | undefined, cursor: string): string {
  // A cursor is base64url: nothing in it needs escaping. A tag may need it.
  if (tag === undefined) return `</plants?limit=${limit}&cursor=${cursor}>; rel="next"`;
  const query = new URLSearchParams({ limit: String(limit) });
  query.set('tag', tag);
  query.set('cursor', cursor);
  return `</plants?${query.toString()}>; rel="next"`; // RFC 8288
}

/**
 * Each page's body (its JSON, entity tag and compressed forms), by the page: the service answers a
 * page it made before with the same array (PlantService), so a page read again is not serialized,
 * hashed or compressed again.
 */
const pageBodies = new WeakMap<readonly Plant[], Representation>();

/** The three operations: schema → service → reply, nothing else. */
export function plantRoutes(service: PlantService): FastifyPluginAsyncTypebox {
  return async (app) => {
    const encoded = new EncodedBodies();
    app.post(
      '/plants',
      { schema: createPlantSchema, config: { scope: 'plants:write' }, preValidation: requireJson },
      (request) => service.create(request.principal, request.body),
    );

    // compress: false: the route encodes its pages itself, once each, with an entity tag per
    // coding (http/representation.ts); @fastify/compress would compress every response anew.
    app.get(
      '/plants',
      { schema: listPlantsSchema, config: { scope: 'plants:read' }, compress: false },
      async (request, reply) => {
        const { limit = LIMIT_DEFAULT, cursor, tag } = request.query;
        const { plants, next } = await service.list(request.principal, { limit, cursor, tag });
        const link = next === undefined ? undefined : nextLink(limit, tag, next);
        if (link !== undefined) void reply.header('link', link);
        let body = pageBodies.get(plants);
        if (body === undefined || body.metadata !== link) {
          // Written by this route's own serializer (its response schema); the type provider types only
          // the object. A string skips preSerialization hooks: this app has none (a test reads the bytes).
          const json = body?.text ?? (reply.serialize(plants) as string);
          pageBodies.set(plants, (body = new Representation(json, 'application/json; charset=utf-8', link)));
        }
        return sendRepresentation(request, reply, body, encoded);
      },
    );

    // compress: false: a delete answers 204 or a short Error body, never as much as the
    // compression threshold, so @fastify/compress's two hooks would only cost it time.
    app.delete(
      '/plants/:id',
      { schema: deletePlantSchema, config: { scope: 'plants:write' }, compress: false },
      async (request, reply) => {
        await service.delete(request.principal, request.params.id);
        return reply.code(204).send(null);
      },
    );
  };
}
