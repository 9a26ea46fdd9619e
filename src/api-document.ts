import type { ApiDescription, ApiPart } from './http/openapi.js';
import { ERRORS_API } from './http/responses.js';
import { EVENTS_API } from './events/event.routes.js';
import { PLANTS_API } from './plants/plant.routes.js';
import { OPERATIONS_API } from './system/system.routes.js';
import { WEBHOOKS_API } from './webhooks/webhook.openapi.js';

// What the OpenAPI document says of Plant Store beyond its routes: composed here, where the app
// is, because it speaks of every feature; http/openapi.ts turns it and the routes into the document.

/** The top of the /docs page (Swagger UI renders it as Markdown): what this is, and how to get a token. */
const DESCRIPTION = `Plants stored per user over HTTP/JSON, with webhooks and a change feed that tell other systems what changed.

**Getting a token.** Every operation except \`/healthz\` and \`/readyz\` needs \`Authorization: Bearer <token>\`.
On the server's machine, with the server's settings (the same \`DATABASE_URL\`), run

    plant-store token create --subject alice --scopes plants:read,plants:write

(in a checkout, \`export PATH="$PWD/bin:$PATH"\` first, in its root, makes \`plant-store\` its command).

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
  (\`Accept: application/json\`); streams that survive a deploy (\`retry:\`) and end with their token.
- Version 1.3.0 made the event side hold against hostile and unlucky receivers and opened the feed to browsers:
  \`POST /events/tickets\` and \`GET /events?ticket=\` (a browser's \`EventSource\` cannot send \`Authorization\`);
  a webhook's \`previousSecretExpiresAt\`; \`recover\` also creates what a paused webhook was not sent
  (\`{"requeued", "created"}\`); any receiver's answer recorded (NUL, binary) and its outcome counted; a fair share
  of deliveries per webhook and per subject; a retry asked during an attempt kept; \`enable\` on an active webhook
  changing nothing; \`Retry-After\` read only in RFC 9110's two forms; an interim 1xx before the final answer.`;

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

/**
 * Examples of the standard HTTP fields the routes declare without one (x-request-headers,
 * x-response-headers), so that every parameter of the document has an example. An If-None-Match
 * example must not match (`*` would): a request built from the examples gets the page, not a 304.
 */
const HEADER_EXAMPLES: Readonly<Record<string, string>> = {
  'If-None-Match': '"Jx3qQ0q4rVYb5nE1s9fKkA"',
  ETag: '"Jx3qQ0q4rVYb5nE1s9fKkA"',
  Link: '</plants?limit=10&cursor=cDE6NDI>; rel="next"',
  Vary: 'Accept-Encoding',
};

/** The parts in the order of the /docs page: its tags, and the document's components. */
const PARTS: readonly ApiPart[] = [PLANTS_API, ERRORS_API, WEBHOOKS_API, EVENTS_API, OPERATIONS_API];

export const API_DESCRIPTION: ApiDescription = {
  info: {
    title: 'Plant Store',
    version: '1.4.0',
    description: DESCRIPTION,
    // Spectral's info-contact: who answers for this API. No address is given, since each
    // deployment has its own operators; PUBLIC_URL's server is where to find them.
    contact: { name: 'Plant Store maintainers' },
    license: { name: 'MIT', identifier: 'MIT' },
  },
  parts: PARTS,
  errorExamples: ERROR_EXAMPLES,
  headerExamples: HEADER_EXAMPLES,
};
