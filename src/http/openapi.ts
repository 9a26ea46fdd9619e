import type { RouteOptions } from 'fastify';
import { REALM } from '../auth/authenticate.js';

/**
 * The OpenAPI 3.1 document, generated from the very route schemas Fastify validates with, so the
 * two cannot drift. This builder knows HTTP and the authentication, nothing of the features: what
 * the document says beyond the routes (its info, each part's tags, named schemas and webhooks,
 * the examples) is handed in by the app (src/api-document.ts).
 */

export type Json = Record<string, unknown>;
type RouteSchema = Json & { response?: Record<string, Json>; params?: Json; querystring?: Json; body?: Json };

/** A shape the document names as a component; a route schema with the same `properties` becomes a reference to it. */
export type NamedSchema = readonly [name: string, schema: { readonly properties: unknown }];

/** What one part of the service (a feature, the HTTP layer, the operator surface) adds to the document. */
export interface ApiPart {
  /** Its tags, each declared with a description (Spectral's operation-tag-defined). */
  readonly tags?: readonly Json[];
  /** The shapes of its routes that the document names as components. */
  readonly schemas?: readonly NamedSchema[];
  /** What it POSTs to other systems (OpenAPI 3.1 `webhooks`). */
  readonly webhooks?: Json;
}

/** What the document says beyond the routes. */
export interface ApiDescription {
  /** The Info Object: title, version, description, contact, license. */
  readonly info: Json;
  /** In the order of the document's tags and components (the /docs page follows it). */
  readonly parts: readonly ApiPart[];
  /** One example Error message per status, so that a 401 shows what a 401 says. */
  readonly errorExamples: Readonly<Record<string, string>>;
  /** Examples of the standard HTTP fields the routes declare without one (x-request-headers, x-response-headers). */
  readonly headerExamples: Readonly<Record<string, string>>;
}

/** The description as the functions below read it. */
interface Context {
  readonly named: readonly NamedSchema[];
  readonly errorExamples: Readonly<Record<string, string>>;
  readonly headerExamples: Readonly<Record<string, string>>;
}

/**
 * A route schema as OpenAPI 3.1 writes it: the serializer's `nullable: true` (which it needs for a
 * bigint that may be null, delivery.schema.ts) becomes a type list with "null".
 */
const plain = (schema: unknown): Json =>
  JSON.parse(JSON.stringify(schema), (_key, value: unknown) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const { nullable, ...rest } = value as Json;
    if (nullable !== true || typeof rest.type !== 'string') return value;
    return { ...rest, type: [rest.type, 'null'] };
  }) as Json;

/** A schema with the named shapes replaced by references to them. */
function refs(schema: Json, context: Context): Json {
  const named = context.named.find(([, s]) => s.properties === schema.properties);
  if (named) return { $ref: `#/components/schemas/${named[0]}` };
  if (schema.type === 'array' && schema.items) return { ...plain(schema), items: refs(schema.items as Json, context) };
  return plain(schema);
}

const header = (description: string, example: string | number): Json => ({
  description,
  schema: { type: typeof example === 'number' ? 'integer' : 'string' },
  example,
});

const RESPONSE_HEADERS: Record<string, Json> = {
  401: {
    'WWW-Authenticate': header(
      `\`${REALM}\`, with \`error="invalid_token"\` when a token was sent`,
      `${REALM}, error="invalid_token"`,
    ),
  },
  403: {
    'WWW-Authenticate': header(
      `\`${REALM}, error="insufficient_scope", scope="…"\``,
      `${REALM}, error="insufficient_scope", scope="plants:write"`,
    ),
  },
  429: {
    'Retry-After': header('seconds until the window resets', 12),
    'RateLimit-Limit': header('requests allowed per window', 600),
    'RateLimit-Remaining': header('requests left in this window', 0),
    'RateLimit-Reset': header('seconds until the window resets', 12),
  },
  503: { 'Retry-After': header('seconds to wait before retrying', 5) },
};

/** An example from the description for a header field declared without one (an If-None-Match example must not match). */
function withExample(name: string, spec: Json, context: Context): Json {
  return spec.example === undefined && context.headerExamples[name] !== undefined
    ? { ...spec, example: context.headerExamples[name] }
    : spec;
}

const headersWithExamples = (headers: Json, context: Context): Json =>
  Object.fromEntries(Object.entries(headers).map(([name, spec]) => [name, withExample(name, spec as Json, context)]));

function parameters(schema: Json | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const required = (schema.required as string[] | undefined) ?? [];
  return Object.entries(schema.properties as Record<string, Json>).map(([name, property]) => {
    const { description, ...rest } = plain(property);
    // The schema's first example, on the parameter too: the field generators and Swagger UI read first.
    const example = Array.isArray(rest.examples) ? (rest.examples as unknown[])[0] : undefined;
    return {
      name,
      in: where,
      required: where === 'path' || required.includes(name),
      description,
      schema: rest,
      ...(example !== undefined && { example }),
    };
  });
}

function errorExample(status: string, schema: Json, context: Context): Json {
  const message = context.errorExamples[status];
  return schema.$ref === '#/components/schemas/Error' && message !== undefined
    ? { schema, example: { error: Number(status), message } }
    : { schema };
}

function responses(schema: RouteSchema, context: Context): Json {
  const out: Json = {};
  for (const [status, response] of Object.entries(schema.response ?? {})) {
    const { description = 'OK' } = response as { description?: string };
    const entry: Json = { description };
    if (response.content !== undefined)
      entry.content = response.content; // not JSON (the change feed)
    else if (response.type !== 'null') {
      const body = refs(response, context);
      delete body.description;
      entry.content = { 'application/json': errorExample(status, body, context) };
    }
    const headers = RESPONSE_HEADERS[status] ?? (status === '200' ? schema['x-response-headers'] : undefined);
    if (headers) entry.headers = headersWithExamples(headers as Json, context);
    out[status] = entry;
  }
  // Answers a route gives without a body schema (304 for a conditional list), in status order.
  for (const [status, entry] of Object.entries((schema['x-more-responses'] as Json | undefined) ?? {})) {
    const { headers, ...rest } = entry as Json;
    out[status] = headers === undefined ? rest : { ...rest, headers: headersWithExamples(headers as Json, context) };
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => Number(a) - Number(b)));
}

function headerParameters(headers: Json | undefined, context: Context): Json[] {
  return Object.entries(headers ?? {}).map(([name, spec]) => ({
    name,
    in: 'header',
    required: false,
    ...withExample(name, spec as Json, context),
  }));
}

/** What the route's scope asks of a token, said in the operation's description. */
function scopeNote(scope: unknown): string | undefined {
  if (typeof scope !== 'string') return undefined;
  if (scope.startsWith('plants:')) return `Needs a token with the scope \`${scope}\` (or \`plants:admin\`).`;
  return `Needs a token with the scope \`${scope}\`.`;
}

function operation(schema: RouteSchema, scope: unknown, context: Context): Json {
  const op: Json = {};
  for (const key of ['operationId', 'summary', 'description', 'tags', 'security']) {
    if (schema[key] !== undefined) op[key] = schema[key];
  }
  const note = scopeNote(scope);
  if (note !== undefined) op.description = typeof op.description === 'string' ? `${op.description} ${note}` : note;
  const params = [
    ...parameters(schema.params, 'path'),
    ...parameters(schema.querystring, 'query'),
    ...headerParameters(schema['x-request-headers'] as Json | undefined, context),
  ];
  if (params.length > 0) op.parameters = params;
  // `x-body-optional`: a route that reads no body as `{}` (json-body.ts, jsonOrNothing).
  if (schema.body) {
    const required = schema['x-body-optional'] !== true;
    op.requestBody = { required, content: { 'application/json': { schema: refs(schema.body, context) } } };
  }
  op.responses = responses(schema, context);
  return op;
}

export interface OpenApiOptions {
  /** The `servers` URL (PUBLIC_URL): absolute, or relative to where the document was fetched from. */
  readonly publicUrl?: string;
}

export function buildOpenApi(
  routes: readonly RouteOptions[],
  { info, parts, errorExamples, headerExamples }: ApiDescription,
  { publicUrl = '/' }: OpenApiOptions = {},
): Json {
  const context: Context = { named: parts.flatMap((part) => part.schemas ?? []), errorExamples, headerExamples };
  const webhooks = parts.flatMap((part) => (part.webhooks === undefined ? [] : [part.webhooks]));
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const schema = route.schema as RouteSchema | undefined;
    if (!schema || schema.hide === true) continue;
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    const scope = (route.config as { scope?: unknown } | undefined)?.scope;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      paths[path] = { ...paths[path], [method.toLowerCase()]: operation(schema, scope, context) };
    }
  }
  return {
    openapi: '3.1.0',
    info,
    servers: [
      {
        url: publicUrl,
        description: publicUrl === '/' ? 'the server this document was fetched from' : 'this deployment',
      },
    ],
    security: [{ bearerAuth: [] }],
    tags: parts.flatMap((part) => part.tags ?? []),
    paths,
    ...(webhooks.length > 0 && { webhooks: Object.assign({}, ...webhooks) as Json }),
    components: {
      schemas: Object.fromEntries(context.named.map(([name, schema]) => [name, plain(schema)])),
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API token from `plant-store token create` (or, on a server with `JWT_JWKS_URL` set, a JWT from its OpenID Connect provider).',
        },
        eventTicket: {
          type: 'apiKey',
          in: 'query',
          name: 'ticket',
          description:
            'GET /events only, in place of the bearer token: a single-use ticket of 60 s from `POST /events/tickets`, for a browser’s `EventSource`, which cannot send `Authorization`.',
        },
      },
    },
  };
}
