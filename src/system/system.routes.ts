import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from 'typebox';
import { HttpError } from '../errors.js';
import { errorResponses } from '../http/responses.js';
import type { Store } from '../store/store.js';

interface SystemDeps {
  readonly store: Pick<Store, 'isReady'>;
  /** Builds the OpenAPI document from the routes registered so far; called once. */
  readonly openapi: () => Record<string, unknown>;
}

const Status = Type.Object({ status: Type.String() });

/** Public routes, registered outside the authenticated scope (STYLE.md, "Public routes by scope"). */
export function systemRoutes({ store, openapi }: SystemDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    let document: Record<string, unknown> | undefined;
    const getDocument = (): Record<string, unknown> => (document ??= openapi());

    app.get(
      '/healthz',
      {
        schema: {
          operationId: 'healthz',
          summary: 'The process is alive',
          tags: ['operations'],
          security: [],
          response: { 200: Status },
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
          tags: ['operations'],
          security: [],
          response: { 200: Status, ...errorResponses(503) },
        },
      },
      async () => {
        if (!(await store.isReady())) throw new HttpError(503, 'the database is unreachable', { 'retry-after': '5' });
        return { status: 'ready' };
      },
    );

    app.get('/openapi.json', { schema: { hide: true } }, async () => getDocument());

    // Swagger UI's own files, served from node_modules: the page loads nothing from elsewhere.
    await app.register(swagger, { mode: 'static', specification: { document: getDocument() as never } });
    await app.register(swaggerUi, {
      routePrefix: '/docs',
      // validatorUrl null: the page never asks validator.swagger.io (or anyone) about the document.
      uiConfig: { deepLinking: true, tryItOutEnabled: false, validatorUrl: null },
      theme: { title: 'Plant Store API' },
    });
  };
}
