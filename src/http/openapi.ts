import type { RouteOptions } from 'fastify';
import { EXAMPLE_PLANT, ErrorSchema, NewPlant, Plant } from '../plants/plant.schema.js';
import { AttemptSchema, DeliverySchema } from '../webhooks/delivery.schema.js';
import {
  CreatedWebhookSchema,
  EXAMPLE_WEBHOOK,
  NewWebhookSchema,
  RotatedWebhookSchema,
  WebhookPatchSchema,
  WebhookSchema,
} from '../webhooks/webhook.schema.js';
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
  ['Webhook', WebhookSchema],
  ['NewWebhook', NewWebhookSchema],
  ['CreatedWebhook', CreatedWebhookSchema],
  ['Delivery', DeliverySchema],
  ['WebhookPatch', WebhookPatchSchema],
  ['RotatedWebhook', RotatedWebhookSchema],
  ['DeliveryAttempt', AttemptSchema],
];

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
function refs(schema: Json): Json {
  const named = NAMED.find(([, s]) => s.properties === schema.properties);
  if (named) return { $ref: `#/components/schemas/${named[0]}` };
  if (schema.type === 'array' && schema.items) return { ...plain(schema), items: refs(schema.items as Json) };
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

/**
 * Examples of the standard HTTP fields the routes declare without one (x-request-headers,
 * x-response-headers), so that every parameter of the document has an example. An If-None-Match
 * example must not match (`*` would): a request built from the examples gets the page, not a 304.
 */
const HEADER_EXAMPLES: Record<string, string> = {
  'If-None-Match': '"Jx3qQ0q4rVYb5nE1s9fKkA"',
  ETag: '"Jx3qQ0q4rVYb5nE1s9fKkA"',
  Link: '</plants?limit=10&cursor=cDE6NDI>; rel="next"',
  Vary: 'Accept-Encoding',
};

function withExample(name: string, spec: Json): Json {
  return spec.example === undefined && HEADER_EXAMPLES[name] !== undefined
    ? { ...spec, example: HEADER_EXAMPLES[name] }
    : spec;
}

const headersWithExamples = (headers: Json): Json =>
  Object.fromEntries(Object.entries(headers).map(([name, spec]) => [name, withExample(name, spec as Json)]));

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

/**
 * One example Error body per status, in the server's own words, so that /docs and generated
 * tests show under a 401 what a 401 says (the Error schema's own example is the 404).
 */
const ERROR_EXAMPLES: Readonly<Record<string, string>> = {
  '400':
    'body.name must be 1 to 200 Unicode code points, no control characters (U+0000–U+001F, U+007F), no lone surrogates',
  '401': 'this API needs a bearer token: Authorization: Bearer <token>',
  '403': 'this operation needs the scope plants:write',
  '404': 'no plant with id 42',
  '408': 'the request took too long to arrive',
  '409': 'a plant with id 42 already exists',
  '410': 'events after 1 are past the retention; read the plants again, then follow the feed from now',
  '413': 'Request body is too large',
  '415': 'the body must be JSON in UTF-8: send Content-Type: application/json',
  '429': 'rate limit of 600 requests exceeded; retry in 12 s',
  '431': 'the request headers are too large',
  '500': 'internal server error',
  '503': 'the database is unavailable; retry shortly',
};

function errorExample(status: string, schema: Json): Json {
  const message = ERROR_EXAMPLES[status];
  return schema.$ref === '#/components/schemas/Error' && message !== undefined
    ? { schema, example: { error: Number(status), message } }
    : { schema };
}

function responses(schema: RouteSchema): Json {
  const out: Json = {};
  for (const [status, response] of Object.entries(schema.response ?? {})) {
    const { description = 'OK' } = response as { description?: string };
    const entry: Json = { description };
    if (response.content !== undefined)
      entry.content = response.content; // not JSON (the change feed)
    else if (response.type !== 'null') {
      const body = refs(response);
      delete body.description;
      entry.content = { 'application/json': errorExample(status, body) };
    }
    const headers = RESPONSE_HEADERS[status] ?? (status === '200' ? schema['x-response-headers'] : undefined);
    if (headers) entry.headers = headersWithExamples(headers as Json);
    out[status] = entry;
  }
  // Answers a route gives without a body schema (304 for a conditional list), in status order.
  for (const [status, entry] of Object.entries((schema['x-more-responses'] as Json | undefined) ?? {})) {
    const { headers, ...rest } = entry as Json;
    out[status] = headers === undefined ? rest : { ...rest, headers: headersWithExamples(headers as Json) };
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => Number(a) - Number(b)));
}

function headerParameters(headers: Json | undefined): Json[] {
  return Object.entries(headers ?? {}).map(([name, spec]) => ({
    name,
    in: 'header',
    required: false,
    ...withExample(name, spec as Json),
  }));
}

/** What the route's scope asks of a token, said in the operation's description. */
function scopeNote(scope: unknown): string | undefined {
  if (typeof scope !== 'string') return undefined;
  if (scope.startsWith('plants:')) return `Needs a token with the scope \`${scope}\` (or \`plants:admin\`).`;
  return `Needs a token with the scope \`${scope}\`.`;
}

function operation(schema: RouteSchema, scope: unknown): Json {
  const op: Json = {};
  for (const key of ['operationId', 'summary', 'description', 'tags', 'security']) {
    if (schema[key] !== undefined) op[key] = schema[key];
  }
  const note = scopeNote(scope);
  if (note !== undefined) op.description = typeof op.description === 'string' ? `${op.description} ${note}` : note;
  const params = [
    ...parameters(schema.params, 'path'),
    ...parameters(schema.querystring, 'query'),
    ...headerParameters(schema['x-request-headers'] as Json | undefined),
  ];
  if (params.length > 0) op.parameters = params;
  if (schema.body) op.requestBody = { required: true, content: { 'application/json': { schema: refs(schema.body) } } };
  op.responses = responses(schema);
  return op;
}

const signatureHeaders: Json[] = [
  [
    'webhook-id',
    'the message id, `evt_<event id>`: the same on every retry of one event (`ping_<delivery id>` for a ping)',
    'evt_1',
  ],
  ['webhook-timestamp', 'Unix seconds when this attempt was signed', '1740821400'],
  [
    'webhook-signature',
    "`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the secret; during a rotation's overlap two, space-separated: `v1,<with the new secret> v1,<with the old>`",
    'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  ],
  ['plant-store-event', 'the event type, or `webhook.ping`', 'plant.created'],
].map(([name, description, example]) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema: { type: 'string' },
  example,
}));

const received = {
  '200': { description: 'Return a 200 status to indicate that the data was received successfully' },
};

/** What the service POSTs to a webhook (OpenAPI 3.1 `webhooks`): the original document's newPlant, and plantDeleted. */
const WEBHOOKS: Json = {
  newPlant: {
    post: {
      summary: 'A plant was created (plant.created)',
      description:
        'Sent to every active webhook that receives plant.created events, signed as Standard Webhooks says. Any 2xx is success; anything else, or no answer in 10 s, is retried.',
      parameters: signatureHeaders,
      requestBody: {
        description: 'Information about a new plant in the system',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPlant' } } },
      },
      responses: received,
    },
  },
  plantDeleted: {
    post: {
      summary: 'A plant was deleted (plant.deleted)',
      description: 'Sent as newPlant is, for plant.deleted events.',
      parameters: signatureHeaders,
      requestBody: {
        description: 'The id of the deleted plant',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { id: { type: 'integer', format: 'int64' } },
              required: ['id'],
              additionalProperties: false,
              examples: [{ id: EXAMPLE_PLANT.id }],
            },
          },
        },
      },
      responses: received,
    },
  },
  webhookPing: {
    post: {
      summary: 'A test delivery (webhook.ping)',
      description:
        'Sent once when the webhook’s owner asks for it (POST /webhooks/{id}/ping), whatever the webhook’s status, signed as newPlant is, with `plant-store-event: webhook.ping`. Never on the change feed.',
      parameters: signatureHeaders,
      requestBody: {
        description: 'The id of the webhook pinged',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { webhookId: { type: 'string' } },
              required: ['webhookId'],
              additionalProperties: false,
              examples: [{ webhookId: EXAMPLE_WEBHOOK.id }],
            },
          },
        },
      },
      responses: received,
    },
  },
};

/** The top of the /docs page (Swagger UI renders it as Markdown): what this is, and how to get a token. */
const DESCRIPTION = `Plants stored per user over HTTP/JSON, with webhooks and a change feed that tell other systems what changed.

**Getting a token.** Every operation except \`/healthz\` and \`/readyz\` needs \`Authorization: Bearer <token>\`.
On the server's machine, with the server's settings (the same \`DATABASE_URL\`), run

    npx plant-store token create --subject alice --scopes plants:read,plants:write

It prints the token once; keep it. On this page, click **Authorize**, paste the token, and use **Try it out** on any
operation. The scopes: \`plants:read\` (list, the change feed), \`plants:write\` (create, delete), \`plants:admin\`
(every user's plants, and both of the above), \`webhooks:read\` and \`webhooks:write\`. A server set up for OpenID
Connect (\`JWT_JWKS_URL\`) also accepts the provider's JWTs.

**Conventions.**
- Ids are int64: read them as exact integers (JavaScript's \`JSON.parse\` rounds those beyond 2^53).
- Every error answer carries the \`Error\` body. Besides the statuses each operation lists, the HTTP layer answers 404
  for an unknown path (also \`/plants/\` with a trailing slash), 405 (with \`Allow\`) for a wrong method, 408 for a
  request that is too slow and 431 for oversized headers.
- Answers carry \`X-Request-Id\`, \`Cache-Control: no-store\` and \`X-Content-Type-Options: nosniff\`; with rate
  limiting on, API answers carry \`RateLimit-*\`.
- With \`CORS_ORIGINS\` set, a listed origin gets \`Access-Control-Allow-Origin\` (never
  \`Access-Control-Allow-Credentials\`), \`Access-Control-Expose-Headers: Link, X-Request-Id, Retry-After,
  RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, WWW-Authenticate, ETag\` and \`Vary: Origin\`; preflights
  (\`OPTIONS\`) get 204 without authentication, with \`Access-Control-Allow-Methods: GET, HEAD, POST, PATCH, DELETE\`,
  \`Access-Control-Allow-Headers: Authorization, Content-Type, X-Request-Id, Last-Event-ID, If-None-Match\` and
  \`Access-Control-Max-Age: 7200\`, and \`Allow\` in a 405 also names \`OPTIONS\`.
- Version 1.1.0 added the events: webhooks (deliveries signed as Standard Webhooks says) and the change feed
  (\`GET /events\`, Server-Sent Events).
- Version 1.2.0 added what subscribers and operators rely on: \`PATCH /webhooks/{id}\`, secret rotation with an
  overlap (two signatures), \`ping\`, \`recover\`, the attempt log, \`Retry-After\` honoured, a webhook's
  \`description\`, \`failingSince\` and \`disabledReason\`; the feed's \`?types=\` and its JSON pages
  (\`Accept: application/json\`); streams that survive a deploy (\`retry:\`) and end with their token.`;

/** Declared with a description each (Spectral's operation-tag-defined); the order of the /docs page. */
const TAGS: Json[] = [
  { name: 'plants', description: "Create, list and delete the caller's plants." },
  { name: 'webhooks', description: 'Subscriptions that POST each plant.created and plant.deleted event to a URL.' },
  { name: 'events', description: 'The change feed: every change, live, as Server-Sent Events.' },
  { name: 'operations', description: 'Liveness and readiness probes for load balancers and orchestrators; no token.' },
];

export interface OpenApiOptions {
  /** The `servers` URL (PUBLIC_URL): absolute, or relative to where the document was fetched from. */
  readonly publicUrl?: string;
}

export function buildOpenApi(routes: readonly RouteOptions[], { publicUrl = '/' }: OpenApiOptions = {}): Json {
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const schema = route.schema as RouteSchema | undefined;
    if (!schema || schema.hide === true) continue;
    const path = route.url.replace(/:(\w+)/g, '{$1}');
    const scope = (route.config as { scope?: unknown } | undefined)?.scope;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      paths[path] = { ...paths[path], [method.toLowerCase()]: operation(schema, scope) };
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Plant Store',
      version: '1.2.0',
      description: DESCRIPTION,
      // Spectral's info-contact: who answers for this API. No address is given, since each
      // deployment has its own operators; PUBLIC_URL's server is where to find them.
      contact: { name: 'Plant Store maintainers' },
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [
      {
        url: publicUrl,
        description: publicUrl === '/' ? 'the server this document was fetched from' : 'this deployment',
      },
    ],
    security: [{ bearerAuth: [] }],
    tags: TAGS,
    paths,
    webhooks: WEBHOOKS,
    components: {
      schemas: Object.fromEntries(NAMED.map(([name, schema]) => [name, plain(schema)])),
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'An API token from `plant-store token create` (or, on a server with `JWT_JWKS_URL` set, a JWT from its OpenID Connect provider).',
        },
      },
    },
  };
}
