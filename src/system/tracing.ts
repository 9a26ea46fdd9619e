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
import type { core, tracing as sdkTracing } from '@opentelemetry/sdk-node';
import { redactUrl } from '../http/request-log.js';
import { type DeliveryTrace, type TracingHooks, tracing } from '../tracing-hooks.js';

/**
 * OpenTelemetry tracing, on when the standard OTLP endpoint variable is set (docs/tracing.md).
 *
 * Loaded by the command's entry (bin/plant-store.js) before any module of the server, and only
 * then: with tracing off, neither the SDK nor this module is ever imported.
 */

const SCOPE = 'plant-store';

/** What the app's log is to the tracing: the two levels it writes at. */
type TracingLog = Pick<FastifyInstance['log'], 'warn' | 'info'>;

/**
 * Starts the SDK: OTLP/HTTP export configured by the standard OTEL_* variables (endpoint, headers,
 * protocol, sampler, batch sizes, resource), spans from the official http and pg instrumentations,
 * and this service's own spans through `tracing.current`. Traces only: metrics stay on /metrics.
 * `env` is the process's environment, given by the command's entry (bin/plant-store.js): the SDK
 * and its exporters read the same variables there themselves, as OpenTelemetry specifies.
 */
export async function startTracing(env: NodeJS.ProcessEnv): Promise<void> {
  // instrumentation-pg patches `pg` as it is imported; the server imports it as an ES module, which
  // only a loader hook can reach. The hook is told to look at `pg` alone and leave every other import as it is.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: ['pg'] } });
  const [{ NodeSDK, core: otelCore }, { HttpInstrumentation }, { PgInstrumentation }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-pg'),
  ]);
  const named = Boolean(env.OTEL_SERVICE_NAME) || /(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '');
  const otlp = await otlpExporter(env);
  const watched = otlp && new WatchedExporter(otlp.exporter, otlp.target, otelCore.ExportResultCode.SUCCESS);
  const sdk = new NodeSDK({
    ...(named ? {} : { serviceName: 'plant-store' }),
    // The SDK's own choice from the same variables, watched; another exporter (zipkin, console) is left to the SDK.
    ...(watched ? { traceExporter: watched } : {}),
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        // Outgoing calls are the OTLP exports and the webhooks' attempts (those traced below, by hand).
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
  const exportsTo = otlp?.target ?? `OTEL_TRACES_EXPORTER=${env.OTEL_TRACES_EXPORTER ?? ''}`;
  tracing.current = new OtelHooks(exportsTo, () => sdk.shutdown(), watched);
}

/**
 * The OTLP exporter the SDK would make from the same variables (OTEL_TRACES_EXPORTER unset or
 * `otlp`; the protocol from OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL,
 * `http/protobuf` by default), and where it sends; undefined for any other exporter.
 */
async function otlpExporter(
  env: NodeJS.ProcessEnv,
): Promise<{ exporter: sdkTracing.SpanExporter; target: string } | undefined> {
  const names = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '' && name !== 'null');
  if (names.some((name) => name !== 'otlp')) return undefined;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || '').trim();
  const { OTLPTraceExporter } = await (protocol === 'grpc'
    ? import('@opentelemetry/exporter-trace-otlp-grpc')
    : protocol === 'http/json'
      ? import('@opentelemetry/exporter-trace-otlp-http')
      : import('@opentelemetry/exporter-trace-otlp-proto'));
  return { exporter: new OTLPTraceExporter(), target: exportTarget(env, protocol === 'grpc') };
}

/**
 * The URL the exporter sends to, as the OTLP exporters read the variables: the traces endpoint as
 * it is, or the general one with `/v1/traces` (over HTTP). Without user, password or query: a
 * credential put there stays out of the log (headers, OTEL_EXPORTER_OTLP_HEADERS, are never read).
 */
export function exportTarget(env: NodeJS.ProcessEnv, grpc = false): string {
  const specific = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const general = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const target =
    specific || (grpc || !general ? general : `${general.endsWith('/') ? general : `${general}/`}v1/traces`);
  try {
    const url = new URL(target ?? '');
    url.username = '';
    url.password = '';
    url.search = '';
    url.hash = '';
    return url.toString();
  } catch {
    return 'an unparsable URL';
  }
}

/**
 * The exporter, watched: the first export that fails is one warning, and the first that succeeds
 * after failures is one line more, with the spans lost meanwhile; never a line per batch
 * (docs/tracing.md, "Failure modes"). Until the app's log is given, what happened waits for it.
 */
class WatchedExporter implements sdkTracing.SpanExporter {
  #log: TracingLog | undefined;
  #failing = false;
  /** The failure not yet told: before the log is given. */
  #untold: string | undefined;
  #lostSpans = 0;

  constructor(
    private readonly exporter: sdkTracing.SpanExporter,
    private readonly target: string,
    private readonly success: core.ExportResultCode,
  ) {}

  export(spans: sdkTracing.ReadableSpan[], done: (result: core.ExportResult) => void): void {
    this.exporter.export(spans, (result) => {
      if (result.code === this.success) this.#succeeded();
      else this.#failed(spans.length, result.error);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }

  tellTo(log: TracingLog): void {
    this.#log = log;
    if (this.#untold !== undefined) this.#warn(this.#untold);
    this.#untold = undefined;
  }

  #failed(spans: number, error: Error | undefined): void {
    this.#lostSpans += spans;
    if (this.#failing) return;
    this.#failing = true;
    // A connection refused on every address of a name is an AggregateError: no message, a code.
    const code = error !== undefined && 'code' in error ? String(error.code) : undefined;
    const reason = error?.message || code || 'the export failed';
    if (this.#log === undefined) this.#untold = reason;
    else this.#warn(reason);
  }

  #warn(reason: string): void {
    this.#log?.warn(
      { endpoint: this.target, reason },
      'tracing: the collector is unreachable: spans are dropped until it answers',
    );
  }

  #succeeded(): void {
    if (!this.#failing) return;
    this.#failing = false;
    this.#untold = undefined;
    this.#log?.info({ endpoint: this.target, lostSpans: this.#lostSpans }, 'tracing: the collector is reachable again');
    this.#lostSpans = 0;
  }
}

class OtelHooks implements TracingHooks {
  readonly #tracer = trace.getTracer(SCOPE);

  constructor(
    readonly exportsTo: string,
    readonly shutdown: () => Promise<void>,
    private readonly exporter: WatchedExporter | undefined,
  ) {}

  instrumentApp(app: FastifyInstance): void {
    this.exporter?.tellTo(app.log);
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
