import { readFile } from 'node:fs/promises';
import swagger from '@fastify/swagger';
import swaggerUi, { type FastifySwaggerUiOptions as SwaggerUiOptions } from '@fastify/swagger-ui';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from '#typebox';
import { HttpError } from '../errors.js';
import type { ApiPart } from '../http/openapi.js';
import { errorResponses } from '../http/responses.js';
import type { Store } from '../store/store.js';

/** What the probes add to the OpenAPI document besides their routes (http/openapi.ts). */
export const OPERATIONS_API: ApiPart = {
  tags: [
    {
      name: 'operations',
      description: 'Liveness and readiness probes for load balancers and orchestrators; no token.',
    },
  ],
};

interface SystemDeps {
  readonly store: Pick<Store, 'isReady'>;
  /** True from the moment this process starts draining (SIGTERM): /readyz then answers 503. */
  readonly draining?: () => boolean;
  /** Builds the OpenAPI document from the routes registered so far; called once. */
  readonly openapi: () => Record<string, unknown>;
}

/** `{"status": "<value>"}`, the one answer a probe gets when all is well. */
const status = (value: string) =>
  Type.Object(
    { status: Type.String({ description: `always \`${value}\``, examples: [value] }) },
    { examples: [{ status: value }] },
  );

// The page's icon, a leaf: assets/ sits beside src/ and dist/, so this path holds in both.
const FAVICON = new URL('../../assets/favicon.svg', import.meta.url);

interface Intercepted {
  userFetch?: (url: string, init: RequestInit) => Promise<Response>;
}

/**
 * Runs in the page (@fastify/swagger-ui writes its source into the page's script). Swagger UI shows
 * an answer once its body has ended, and the change feed never ends: "Try it out" on GET /events
 * would wait forever. An event stream is read for 3 s, then closed, and shown as far as it came.
 */
function requestInterceptor(request: Intercepted): Intercepted {
  request.userFetch = async (url: string, init: RequestInit): Promise<Response> => {
    const response = await fetch(url, init);
    const type = response.headers.get('content-type') ?? '';
    if (response.body === null || !type.startsWith('text/event-stream')) return response;
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const chunks: Uint8Array[] = [];
    const timer = setTimeout(() => void reader.cancel(), 3000);
    for (let read = await reader.read(); !read.done; read = await reader.read()) chunks.push(read.value);
    clearTimeout(timer);
    const { status, statusText, headers } = response;
    return new Response(new Blob(chunks), { status, statusText, headers });
  };
  return request;
}

/**
 * /docs as the service's own page: its name and icon, no framework logo, and no top bar (Swagger
 * UI's StandaloneLayout has one, with a box that loads any URL); BaseLayout is the page without it.
 */
async function docsOptions(): Promise<SwaggerUiOptions> {
  const icon = await readFile(FAVICON);
  return {
    routePrefix: '/docs',
    // validatorUrl null: the page never asks validator.swagger.io (or anyone) about the document.
    // tryItOutEnabled false: a request is sent only after "Try it out", as the button says.
    uiConfig: {
      layout: 'BaseLayout',
      deepLinking: true,
      tryItOutEnabled: false,
      validatorUrl: null,
      requestInterceptor,
    },
    // Only shown by StandaloneLayout; given so that the default (Fastify's) is not even in the page's script.
    logo: { type: 'image/svg+xml', content: icon },
    theme: {
      title: 'Plant Store',
      favicon: [{ filename: 'favicon.svg', rel: 'icon', type: 'image/svg+xml', sizes: 'any', content: icon }],
    },
  };
}

/**
 * Public routes, registered outside the authenticated scope: they need no bearer token
 * (docs/api.md#health-documentation-and-metrics).
 */
export function systemRoutes({ store, openapi, draining = () => false }: SystemDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    let document: Record<string, unknown> | undefined;
    const getDocument = (): Record<string, unknown> => (document ??= openapi());

    app.get(
      '/healthz',
      {
        schema: {
          operationId: 'healthz',
          summary: 'The process is alive',
          description:
            'Answers 200 while the process runs, whatever the database does: a liveness probe restarts the process only when this fails. No token needed.',
          tags: ['operations'],
          security: [],
          response: { 200: status('ok') },
        },
      },
      async () => ({ status: 'ok' }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          operationId: 'readyz',
          summary: 'The database answers',
          description:
            'Answers 200 when the database answers a query, and 503 (with `Retry-After`) when it does not or when this process is shutting down: a load balancer sends work only to ready instances. No token needed.',
          tags: ['operations'],
          security: [],
          response: { 200: status('ready'), ...errorResponses(503) },
        },
      },
      async () => {
        // A load balancer stops sending new work here at once; open connections are still served.
        if (draining()) throw new HttpError(503, 'this server is shutting down', { 'retry-after': '1' });
        if (!(await store.isReady())) throw new HttpError(503, 'the database is unreachable', { 'retry-after': '5' });
        return { status: 'ready' };
      },
    );

    app.get('/openapi.json', { schema: { hide: true } }, async () => getDocument());

    // Swagger UI's own files, served from node_modules: the page loads nothing from elsewhere.
    await app.register(swagger, { mode: 'static', specification: { document: getDocument() as never } });
    await app.register(swaggerUi, await docsOptions());
  };
}
