import { register } from 'node:module';
import {
  ROOT_CONTEXT,
  type Attributes,
  type Span,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
} from '@opentelemetry/api';
import type Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';
import { redactUrl } from '../http/request-log.js';
import { type DeliveryTrace, type TracingHooks, tracing } from './tracing-hooks.js';

/**
 * OpenTelemetry tracing, on when the standard OTLP endpoint variable is set (docs/tracing.md).
 *
 * Loaded by the command's entry (bin/plant-store.js) before any module of the server, and only
 * then: with tracing off, neither the SDK nor this module is ever imported.
 */

const SCOPE = 'plant-store';

/**
 * Starts the SDK: OTLP/HTTP export configured by the standard OTEL_* variables (endpoint, headers,
 * protocol, sampler, batch sizes, resource), spans from the official http and pg instrumentations,
 * and this service's own spans through `tracing.current`. Traces only: metrics stay on /metrics.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  // instrumentation-pg patches `pg` as it is imported; the server imports it as an ES module, which
  // only a loader hook can reach. The hook is told to look at `pg` alone and leave every other import as it is.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: ['pg'] } });
  const [{ NodeSDK }, { HttpInstrumentation }, { PgInstrumentation }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-pg'),
  ]);
  const named = Boolean(env.OTEL_SERVICE_NAME) || /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const sdk = new NodeSDK({
    ...(named ? {} : { serviceName: 'plant-store' }),
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        // Outgoing calls are the OTLP exports themselves (webhooks go through undici, traced below).
        disableOutgoingRequestInstrumentation: true,
        // Liveness probes and scrapes would bury the requests worth reading.
        ignoreIncomingRequestHook: (request) => /^\/(healthz|readyz|metrics)(\?|$)/.test(request.url ?? ''),
        // The URL as the request log writes it: a token in the path or the query never reaches a span.
        startIncomingSpanHook: (request) => {
          const url = redactUrl((request as { url?: string }).url ?? '/');
          const at = url.indexOf('?');
          return at < 0 ? { 'url.path': url } : { 'url.path': url.slice(0, at), 'url.query': url.slice(at + 1) };
        },
      }),
      // Statements without their parameters (a plant's name or a token's hash stays out of the trace),
      // and only inside a trace: background polls would bury the requests' statements.
      new PgInstrumentation({ enhancedDatabaseReporting: false, requireParentSpan: true }),
    ],
  });
  sdk.start();
  tracing.current = new OtelHooks(() => sdk.shutdown());
}

class OtelHooks implements TracingHooks {
  readonly #tracer = trace.getTracer(SCOPE);

  constructor(readonly shutdown: () => Promise<void>) {}

  instrumentApp(app: FastifyInstance): void {
    // onSend runs before the answer is written, while the http instrumentation's server span is open.
    app.addHook('onSend', (request, reply, payload, done) => {
      const span = trace.getActiveSpan();
      if (span !== undefined) {
        const route = request.routeOptions.url;
        if (route !== undefined) {
          span.updateName(`${request.method} ${route}`);
          span.setAttribute('http.route', route);
        }
        // The subject the token or JWT names; never the token, its hash or its id's secret part.
        const principal = request.principal as { subject?: string } | undefined;
        if (principal?.subject !== undefined) span.setAttribute('enduser.id', principal.subject);
        span.setAttribute('plant_store.request_id', String(request.id));
      }
      done(null, payload);
    });
  }

  instrumentSqlite(db: Database.Database): void {
    const tracer = this.#tracer;
    const prepare = db.prepare.bind(db);
    // Each prepared statement's run/get/all/iterate gets a span, named by the statement's first words.
    db.prepare = ((source: string) => {
      const statement = prepare(source);
      const attributes: Attributes = {
        'db.system.name': 'sqlite',
        'db.system': 'sqlite',
        'db.query.text': source,
        'db.statement': source,
        'db.namespace': db.name,
      };
      const name = spanName(source);
      // Not `iterate`: its span would end before the first row is read (only export iterates).
      for (const method of ['run', 'get', 'all'] as const) {
        const original: (this: unknown, ...args: unknown[]) => unknown = Reflect.get(statement, method);
        Object.defineProperty(statement, method, {
          configurable: true,
          value(this: unknown, ...args: unknown[]) {
            // As instrumentation-pg's requireParentSpan: a statement outside any trace gets no span.
            if (trace.getActiveSpan() === undefined) return original.apply(this, args);
            return tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, (span) => {
              try {
                return original.apply(this, args);
              } catch (error) {
                failed(span, error);
                throw error;
              } finally {
                span.end();
              }
            });
          },
        });
      }
      return statement;
    }) as typeof db.prepare;
  }

  detached<T>(work: () => T): T {
    return context.with(ROOT_CONTEXT, work);
  }

  deliver<T extends { status?: number; error?: string }>(
    delivery: DeliveryTrace,
    headers: Record<string, string>,
    send: () => Promise<T>,
  ): Promise<T> {
    const url = new URL(delivery.url);
    // A root span of its own: the event was committed earlier, maybe by another instance.
    return this.#tracer.startActiveSpan(
      'webhook delivery',
      {
        kind: SpanKind.CLIENT,
        root: true,
        attributes: {
          'http.request.method': 'POST',
          'server.address': url.hostname,
          'url.full': url.origin, // no path or query: receivers often carry their own secret there
          'plant_store.webhook.id': delivery.webhookId,
          'plant_store.delivery.id': delivery.deliveryId,
          'plant_store.event.type': delivery.eventType,
          'plant_store.delivery.attempt': delivery.attempt,
        },
      },
      async (span) => {
        propagation.inject(context.active(), headers);
        try {
          const result = await send();
          if (result.status !== undefined) span.setAttribute('http.response.status_code', result.status);
          if (result.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: result.error });
          else if (result.status !== undefined && result.status >= 300)
            span.setStatus({ code: SpanStatusCode.ERROR, message: `HTTP ${result.status}` });
          return result;
        } finally {
          span.end();
        }
      },
    );
  }
}

function spanName(source: string): string {
  const words = source.trim().split(/\s+/, 2);
  return `sqlite ${words.join(' ').toUpperCase()}`.slice(0, 60);
}

function failed(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : String(error));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
