import type { RouteOptions } from 'fastify';
import { ErrorSchema, NewPlant, Plant } from '../plants/plant.schema.js';
import { REALM } from '../auth/authenticate.js';

/**
 * The OpenAPI 3.1 document, generated from the very route schemas Fastify validates with, so the
 * two cannot drift. Plant, NewPlant and Error become named components, as in the original interface.
 */

type Json = Record<string, unknown>;
type RouteSchema = Json & { response?: Record<string, Json>; params?: Json; querystring?: Json; body?: Json };

const NAMED: ReadonlyArray<[string, { readonly properties: unknown }]> = [
  ['Plant', Plant],
  ['NewPlant', NewPlant],
  ['Error', ErrorSchema],
];

const plain = (schema: unknown): Json => JSON.parse(JSON.stringify(schema)) as Json;

/** A schema with the named shapes replaced by references to them. */
function refs(schema: Json): Json {
  const named = NAMED.find(([, s]) => s.properties === schema.properties);
  if (named) return { $ref: `#/components/schemas/${named[0]}` };
  if (schema.type === 'array' && schema.items) return { ...plain(schema), items: refs(schema.items as Json) };
  return plain(schema);
}

const header = (description: string, type = 'string'): Json => ({ description, schema: { type } });

const RESPONSE_HEADERS: Record<string, Json> = {
  401: { 'WWW-Authenticate': header(`\`${REALM}\`, with \`error="invalid_token"\` when a token was sent`) },
  403: { 'WWW-Authenticate': header(`\`${REALM}, error="insufficient_scope", scope="…"\``) },
  429: {
    'Retry-After': header('seconds until the window resets', 'integer'),
    'RateLimit-Limit': header('requests allowed per window', 'integer'),
    'RateLimit-Remaining': header('requests left in this window', 'integer'),
    'RateLimit-Reset': header('seconds until the window resets', 'integer'),
  },
  503: { 'Retry-After': header('seconds to wait before retrying', 'integer') },
};

function parameters(schema: Json | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const required = (schema.required as string[] | undefined) ?? [];
  return Object.entries(schema.properties as Record<string, Json>).map(([name, property]) => {
    const { description, ...rest } = plain(property);
    return { name, in: where, required: where === 'path' || required.includes(name), description, schema: rest };
  });
}

function responses(schema: RouteSchema): Json {
  const out: Json = {};
  for (const [status, response] of Object.entries(schema.response ?? {})) {
    const { description = 'OK' } = response as { description?: string };
    const entry: Json = { description };
    if (response.type !== 'null') {
      const body = refs(response);
      delete body.description;
      entry.content = { 'application/json': { schema: body } };
    }
    const headers = RESPONSE_HEADERS[status] ?? (status === '200' ? schema['x-response-headers'] : undefined);
    if (headers) entry.headers = headers;
    out[status] = entry;
  }
  return out;
}

function operation(schema: RouteSchema): Json {
  const op: Json = {};
  for (const key of ['operationId', 'summary', 'description', 'tags', 'security']) {
    if (schema[key] !== undefined) op[key] = schema[key];
  }
  const params = [...parameters(schema.params, 'path'), ...parameters(schema.querystring, 'query')];
  if (params.length > 0) op.parameters = params;
  if (schema.body) op.requestBody = { required: true, content: { 'application/json': { schema: refs(schema.body) } } };
  op.responses = responses(schema);
  return op;
}

export function buildOpenApi(routes: readonly RouteOptions[]): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const schema = route.schema as RouteSchema | undefined;
    if (!schema || schema.hide === true) continue;
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      paths[path] = { ...paths[path], [method.toLowerCase()]: operation(schema) };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Plant Store',
      version: '1.0.0',
      description:
        'Create, list and delete plants. Every call to /plants needs `Authorization: Bearer <token>`. ' +
        'Errors always carry the `Error` body. Besides the statuses listed per operation, the HTTP layer ' +
        'answers 404 for an unknown path, 405 (with `Allow`) for a wrong method, 408 for a request that is too slow, ' +
        'and 431 for oversized headers. Responses carry `X-Request-Id`, `Cache-Control: no-store` and ' +
        '`X-Content-Type-Options: nosniff`; /plants responses carry `RateLimit-*` headers when rate limiting is on.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      schemas: Object.fromEntries(NAMED.map(([name, schema]) => [name, plain(schema)])),
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'An API token from `plant-store token create`.',
        },
      },
    },
  };
}
