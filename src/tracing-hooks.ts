import type Database from 'better-sqlite3';
import type { FastifyInstance } from 'fastify';

/** What a webhook delivery's span records (never the secret, the signature or the body). */
export interface DeliveryTrace {
  readonly webhookId: string;
  readonly deliveryId: string;
  readonly eventType: string;
  readonly attempt: number;
  readonly url: string;
}

/**
 * The seams where tracing attaches, when it is on (OTEL_EXPORTER_OTLP_ENDPOINT, docs/tracing.md).
 *
 * This module imports nothing of OpenTelemetry: the SDK is loaded by `startTracing`
 * (system/tracing.ts) only when tracing is on, and fills `tracing.current`. With it off every seam
 * is one check of an undefined field, and the hot path is the same code as without tracing
 * (BENCHMARKS.md). It sits below every layer, so that the features and the app reach the seams
 * without importing the operator surface (system/); the store is handed its hook.
 */
export interface TracingHooks {
  /** Where the spans go (the collector's URL without credentials, query or headers), for the start-up line. */
  readonly exportsTo: string;
  /**
   * Names each request's server span after its route pattern, and records the principal's subject;
   * from now on the exporter's trouble is told on the app's log (once when the collector cannot be
   * reached, once when it can again).
   */
  instrumentApp(app: FastifyInstance): void;
  /** Gives every statement of this SQLite connection a span (PostgreSQL's come from instrumentation-pg). */
  instrumentSqlite(db: Database.Database): void;
  /** Runs one delivery attempt in a client span; `headers` gains the span's `traceparent`. */
  deliver<T extends { status?: number; error?: string }>(
    delivery: DeliveryTrace,
    headers: Record<string, string>,
    send: () => Promise<T>,
  ): Promise<T>;
  /** Runs background work (polls, the dispatcher's looks) outside the trace of the request that woke it. */
  detached<T>(work: () => T): T;
  /** Exports what is buffered, then stops: the last spans of a draining process are not lost. */
  shutdown(): Promise<void>;
}

export const tracing: { current: TracingHooks | undefined } = { current: undefined };

/** On when an OTLP endpoint is given, unless OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none says otherwise. */
export function tracingWanted(env: NodeJS.ProcessEnv): boolean {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint) return false;
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  return !(env.OTEL_TRACES_EXPORTER ?? '').split(',').some((name) => name.trim() === 'none');
}

/**
 * Runs `work` outside any trace. A poll or a dispatcher's look that a request happens to start
 * would otherwise carry that request's trace forever (timers keep the context they were made in).
 */
export function untraced<T>(work: () => T): T {
  const current = tracing.current;
  return current === undefined ? work() : current.detached(work);
}
