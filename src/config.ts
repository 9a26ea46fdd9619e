// Environment → validated, frozen Config: the one interpreter of the settings, read once
// (docs/conventions.md#layout). In src/ and bin/, process.env is read only here (loadConfig's and
// loadClientSettings' default), by cli/io.ts, which hands it to the commands, and by
// bin/plant-store.js, which decides whether serve traces; with tracing on, the OpenTelemetry SDK
// reads its own OTEL_* variables.
import { isIP } from 'node:net';
import { type BrokerSetting, BrokerSettingError, parseBrokers } from './wire/broker-settings.js';
import { PostgresUrlError, describePostgresUrl, parsePostgresUrl } from './wire/postgres-url.js';

export interface RateLimit {
  readonly max: number;
  readonly windowMs: number;
}

export type DatabaseTarget =
  | { readonly engine: 'sqlite'; readonly path: string } // ':memory:' for an in-memory store
  | { readonly engine: 'postgres'; readonly url: string };

/** OpenID Connect: JWTs verified against the provider's published keys (JWT_* settings). */
export interface JwtSettings {
  readonly jwksUrl: string;
  readonly issuer: string;
  readonly audience: string;
  /** Signature algorithms accepted; anything else (and `none`) is refused. */
  readonly algorithms: readonly string[];
}

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly database: DatabaseTarget;
  readonly logLevel: string;
  readonly rateLimit: RateLimit | null;
  readonly bodyLimit: number;
  /** Time a client has to send the request headers (slowloris defence). */
  readonly headersTimeoutMs: number;
  /** Time a client has to send the whole request. */
  readonly requestTimeoutMs: number;
  /** How long SIGTERM waits for in-flight requests before exiting anyway. */
  readonly shutdownGraceMs: number;
  /** How long a token check may be answered from memory; bounds how late a revocation takes effect. */
  readonly tokenCacheMs: number;
  /** Worker processes of `serve` sharing one port (node:cluster); 1 runs in a single process. */
  readonly workers: number;
  /** Shared rate-limit counters across instances; null keeps them in each process. */
  readonly redisUrl: string | null;
  /** PostgreSQL connections per process; workers × instances × this must fit max_connections. */
  readonly databasePoolSize: number;
  /**
   * With a PostgreSQL URL of more than one server (or target_session_attrs): how long a request
   * waits for the server to write to (a failover) before its 503.
   */
  readonly databaseFailoverWaitMs: number;
  /** JWT authentication beside the API tokens; null when JWT_JWKS_URL is not set. */
  readonly jwt: JwtSettings | null;
  /** Overload: above this mean event-loop delay, API requests get 503 with Retry-After; 0 turns it off. */
  readonly maxEventLoopDelayMs: number;
  /** How often the event-loop delay is sampled. */
  readonly pressureSampleMs: number;
  /** When set, GET /metrics needs `Authorization: Bearer <this>`. */
  readonly metricsToken: string | null;
  /** The event side (interface 1.1.0): webhooks, their delivery, the change feed. */
  readonly events: EventSettings;
  /** CORS_ORIGINS: the origins whose browser apps may call the service; null (the default) allows none. */
  readonly corsOrigins: CorsOrigins | null;
  /** PUBLIC_URL: where clients reach the API, as the OpenAPI document's `servers` gives it; `/` (relative) by default. */
  readonly publicUrl: string;
  /** PORTAL: whether GET /portal serves the subscribers' page (docs/portal.md); `off` removes its routes. */
  readonly portal: boolean;
  /**
   * TRUST_PROXY: the proxies (addresses, CIDR ranges, or `loopback`, `linklocal`, `uniquelocal`)
   * whose X-Forwarded-For names the client; null (the default) takes the connection's address.
   */
  readonly trustProxy: readonly string[] | null;
}

/** Exact origins as browsers send them (`https://app.example`, `http://127.0.0.1:3000`), or `*` for any. */
export type CorsOrigins = readonly string[] | '*';

export interface EventSettings {
  /** EVENT_RETENTION: how long events and delivery records are kept. */
  readonly retentionMs: number;
  /** WEBHOOK_ALLOW_PRIVATE=1: http:// and private, loopback, link-local targets (development, tests). */
  readonly allowPrivateTargets: boolean;
  /** WEBHOOK_RETRY_SCHEDULE: the wait before each attempt; its length is the number of attempts. */
  readonly retrySchedule: readonly number[];
  /** SECRETS_KEY: 32 bytes that seal webhook secrets at rest (AES-256-GCM); null stores them as they are. */
  readonly secretsKey: Buffer | null;
  /** One attempt's deadline: connect, answer and the first bytes of the body. */
  readonly deliveryTimeoutMs: number;
  /** A dispatcher that dies mid-delivery leaves it to another after this long. */
  readonly leaseMs: number;
  /** Deliveries in flight in one process, and to one webhook from one process. */
  readonly maxInFlight: number;
  readonly maxInFlightPerWebhook: number;
  /** A subject's webhooks together (a fair share, docs/api.md#delivery): a quarter of maxInFlight. */
  readonly maxInFlightPerSubject: number;
  /** A webhook that failed every attempt this long is disabled. */
  readonly disableAfterFailingMs: number;
  readonly maxWebhooksPerSubject: number;
  /** The change feed: a comment line at least this often, and open streams per token. */
  readonly heartbeatMs: number;
  readonly maxStreamsPerToken: number;
  /**
   * WEBHOOK_DELIVERY: false (`off`) serves everything but sends no webhook (a server over a backup,
   * instances kept for the API alone); the deliveries wait in the database for a server that sends.
   */
  readonly delivery: boolean;
  /** BROKERS: the message brokers destinations may publish to, each with what it allows. */
  readonly brokers: readonly BrokerSetting[];
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };

/** `90s`, `12h`, `30d`, `1m`, `500ms` → milliseconds; `undefined` when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const m = /^([0-9]{1,9})(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) return undefined;
  const ms = Number(m[1]) * (DURATION_UNITS[m[2]!] ?? 0);
  return ms > 0 ? ms : undefined;
}

export function parseRateLimit(text: string): RateLimit | null {
  if (text.trim().toLowerCase() === 'off') return null;
  const m = /^([0-9]{1,9})\/([0-9]{0,9}(?:ms|s|m|h|d))$/.exec(text.trim());
  const window = m ? parseDuration(/^[0-9]/.test(m[2]!) ? m[2]! : `1${m[2]!}`) : undefined;
  const max = m ? Number(m[1]) : 0;
  if (!m || window === undefined || max < 1) {
    throw new ConfigError(`RATE_LIMIT must look like 600/1m, 100/s or 20/30s, or be "off"; got "${text}"`);
  }
  return { max, windowMs: window };
}

export function parseSize(text: string, name: string): number {
  const m = /^([0-9]{1,9})\s*(b|kb|mb)?$/i.exec(text.trim());
  const bytes = m ? Number(m[1]) * (SIZE_UNITS[(m[2] ?? 'b').toLowerCase()] ?? 0) : 0;
  if (!m || bytes < 1) throw new ConfigError(`${name} must be a size such as 16kb, 1mb or 4096; got "${text}"`);
  return bytes;
}

export function parseDatabaseUrl(text: string): DatabaseTarget {
  if (text.startsWith('sqlite:')) {
    const path = text.slice('sqlite:'.length).replace(/^\/\//, '');
    if (path === '') throw new ConfigError('DATABASE_URL "sqlite:" needs a path, e.g. sqlite:data/plant-store.db');
    return { engine: 'sqlite', path };
  }
  if (/^postgres(ql)?:\/\//.test(text)) {
    // Read as libpq reads it, one host or several (interface 1.3.0); the message never repeats the URL.
    try {
      parsePostgresUrl(text);
    } catch (error) {
      if (error instanceof PostgresUrlError) throw new ConfigError(error.message);
      throw error;
    }
    return { engine: 'postgres', url: text };
  }
  throw new ConfigError('DATABASE_URL must start with sqlite: or postgres:// (e.g. sqlite:data/plant-store.db)');
}

/** The database without its password: `sqlite:<path>` or `postgres://user@host:port/database`. */
export function describeDatabase(database: DatabaseTarget): string {
  if (database.engine === 'sqlite') return `sqlite:${database.path}`;
  try {
    return describePostgresUrl(parsePostgresUrl(database.url));
  } catch {
    return 'postgres (an unparsable URL)';
  }
}

function parsePort(text: string): number {
  const port = /^[0-9]{1,5}$/.test(text) ? Number(text) : -1;
  if (port < 0 || port > 65535) throw new ConfigError(`PORT must be a number from 0 to 65535; got "${text}"`);
  return port;
}

function durationSetting(env: NodeJS.ProcessEnv, name: string, fallback: string): number {
  const text = env[name] ?? fallback;
  const ms = parseDuration(text);
  if (ms === undefined) throw new ConfigError(`${name} must be a duration such as 500ms, 10s or 1m; got "${text}"`);
  return ms;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const logLevel = (env.LOG_LEVEL ?? 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}; got "${env.LOG_LEVEL}"`);
  }
  return Object.freeze({
    port: parsePort(env.PORT ?? '8080'),
    host: env.HOST ?? '127.0.0.1',
    database: Object.freeze(parseDatabaseUrl(env.DATABASE_URL ?? 'sqlite:data/plant-store.db')),
    logLevel,
    rateLimit: parseRateLimit(env.RATE_LIMIT ?? '600/1m'),
    bodyLimit: parseSize(env.BODY_LIMIT ?? '16kb', 'BODY_LIMIT'),
    ...requestTimeouts(env),
    shutdownGraceMs: durationSetting(env, 'SHUTDOWN_GRACE', '10s'),
    tokenCacheMs: 2000,
    workers: parseWorkers(env.WORKERS ?? '1'),
    redisUrl: parseRedisUrl(env.REDIS_URL),
    databasePoolSize: parsePoolSize(env.DATABASE_POOL_SIZE ?? '10'),
    databaseFailoverWaitMs: durationSetting(env, 'DATABASE_FAILOVER_WAIT', '10s'),
    jwt: parseJwt(env),
    maxEventLoopDelayMs:
      env.MAX_EVENT_LOOP_DELAY?.trim().toLowerCase() === 'off' ? 0 : durationSetting(env, 'MAX_EVENT_LOOP_DELAY', '1s'),
    pressureSampleMs: 500,
    metricsToken: env.METRICS_TOKEN === undefined || env.METRICS_TOKEN === '' ? null : env.METRICS_TOKEN,
    events: parseEventSettings(env),
    corsOrigins: parseCorsOrigins(env.CORS_ORIGINS ?? ''),
    publicUrl: parsePublicUrl(env.PUBLIC_URL ?? ''),
    portal: parseOnOff(env.PORTAL, 'PORTAL', "serve the subscribers' page at /portal, the default"),
    trustProxy: parseTrustProxy(env.TRUST_PROXY ?? ''),
  });
}

/** Node ends a request at REQUEST_TIMEOUT whatever HEADERS_TIMEOUT says: a longer one could never take effect. */
function requestTimeouts(env: NodeJS.ProcessEnv): { headersTimeoutMs: number; requestTimeoutMs: number } {
  const headersTimeoutMs = durationSetting(env, 'HEADERS_TIMEOUT', '10s');
  const requestTimeoutMs = durationSetting(env, 'REQUEST_TIMEOUT', '30s');
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new ConfigError(
      `HEADERS_TIMEOUT (${env.HEADERS_TIMEOUT ?? '10s'}) must not be longer than REQUEST_TIMEOUT (${env.REQUEST_TIMEOUT ?? '30s'}): ` +
        'the whole request, headers included, ends at REQUEST_TIMEOUT',
    );
  }
  return { headersTimeoutMs, requestTimeoutMs };
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/** TRUST_PROXY: comma-separated addresses, CIDR ranges and proxy-addr's names; empty trusts none. */
export function parseTrustProxy(text: string): readonly string[] | null {
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) return null;
  for (const item of items) {
    const [address = '', bits, extra] = item.split('/');
    const family = isIP(address);
    const width = family === 4 ? 32 : 128;
    const fits =
      PROXY_NAMES.includes(item) ||
      (family !== 0 &&
        extra === undefined &&
        (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= width)));
    if (!fits) {
      throw new ConfigError(
        `TRUST_PROXY must list the proxies in front of the service: addresses, CIDR ranges (10.0.0.0/8) or ` +
          `${PROXY_NAMES.join(', ')}, comma-separated; got "${item}"`,
      );
    }
  }
  return Object.freeze(items);
}

// A URL path: RFC 3986 path characters only (pchar and `/`), so that it means the same everywhere it is pasted.
const URL_PATH = /^\/(?!\/)(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$/;

/**
 * PUBLIC_URL: an absolute http(s) URL (`https://plants.example.com`, `https://example.com/plant-store`)
 * or a path (`/plant-store`), relative to wherever the document was fetched from; empty means `/`.
 * No query, fragment or credentials. A trailing slash is dropped, since operation paths start with
 * one (OpenAPI 3.1, Paths Object: the path is appended to the server URL).
 */
export function parsePublicUrl(text: string): string {
  const trimmed = text.trim();
  if (trimmed === '' || trimmed === '/') return '/';
  // A value with credentials in it is not repeated: the message reaches the log.
  const shown = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(trimmed) ? 'the value' : `"${trimmed}"`;
  const refuse = (why: string): ConfigError =>
    new ConfigError(
      `PUBLIC_URL must be an absolute http(s) URL such as https://plants.example.com or a path such as /plant-store ` +
        `(no query, fragment or credentials); ${shown} ${why}`,
    );
  if (trimmed.startsWith('/')) {
    if (!URL_PATH.test(trimmed)) throw refuse('is not a plain URL path');
    return trimmed.replace(/\/+$/, '');
  }
  let url: URL;
  try {
    url = new URL(trimmed);
  } catch {
    throw refuse('is neither');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw refuse(`has the scheme ${url.protocol}`);
  if (url.search !== '' || url.hash !== '' || trimmed.includes('?') || trimmed.includes('#')) {
    throw refuse('has a query or fragment');
  }
  if (url.username !== '' || url.password !== '') throw refuse('has credentials');
  return url.href.replace(/\/+$/, '');
}

/**
 * `https://app.example,http://127.0.0.1:3000`, `*`, or empty (off). Each origin must be written as
 * a browser sends it in `Origin` (scheme://host[:port], lower case, no default port, no path),
 * since requests are matched by exact comparison.
 */
export function parseCorsOrigins(text: string): CorsOrigins | null {
  const trimmed = text.trim();
  if (trimmed === '') return null;
  if (trimmed === '*') return '*';
  const origins = trimmed.split(',').map((entry) => entry.trim());
  for (const entry of origins) {
    let origin: string | undefined;
    try {
      origin = new URL(entry).origin;
    } catch {
      origin = undefined;
    }
    if (origin === entry) continue;
    const hint = origin !== undefined && origin !== 'null' ? ` (as a browser sends it: "${origin}")` : '';
    throw new ConfigError(
      `CORS_ORIGINS must be "*" or comma-separated origins such as https://app.example,http://127.0.0.1:3000; ` +
        `"${entry}" is not an origin${hint}`,
    );
  }
  return Object.freeze([...new Set(origins)]);
}

/** The retry schedule of docs/api.md#delivery: 0 s, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
export const DEFAULT_RETRY_SCHEDULE = '0s,5s,5m,30m,2h,5h,10h,10h';

/** `0s,200ms,1s` → [0, 200, 1000]; a wait may be zero, unlike other durations. */
export function parseRetrySchedule(text: string): number[] {
  const waits = text.split(',').map((part) => (/^\s*0+(ms|s|m|h|d)?\s*$/.test(part) ? 0 : parseDuration(part)));
  if (waits.length === 0 || waits.length > 20 || waits.some((w) => w === undefined)) {
    throw new ConfigError(
      `WEBHOOK_RETRY_SCHEDULE must be 1 to 20 comma-separated durations such as ${DEFAULT_RETRY_SCHEDULE}; got "${text}"`,
    );
  }
  return waits as number[];
}

function parseSecretsKey(text: string | undefined): Buffer | null {
  if (text === undefined || text === '') return null;
  const key = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) {
    throw new ConfigError('SECRETS_KEY must be 32 bytes, as 64 hex digits or base64 (openssl rand -base64 32)');
  }
  return key;
}

/** `on` (the default) or `off`, in any case; anything else is a mistake worth stopping for. */
function parseOnOff(text: string | undefined, name: string, on: string): boolean {
  const value = (text ?? 'on').trim().toLowerCase();
  if (value !== 'on' && value !== 'off') throw new ConfigError(`${name} must be "on" (${on}) or "off"; got "${text}"`);
  return value === 'on';
}

function parseEventSettings(env: NodeJS.ProcessEnv): EventSettings {
  const allow = (env.WEBHOOK_ALLOW_PRIVATE ?? '0').trim();
  if (allow !== '0' && allow !== '1') throw new ConfigError(`WEBHOOK_ALLOW_PRIVATE must be 0 or 1; got "${allow}"`);
  return Object.freeze({
    retentionMs: durationSetting(env, 'EVENT_RETENTION', '7d'),
    allowPrivateTargets: allow === '1',
    retrySchedule: Object.freeze(parseRetrySchedule(env.WEBHOOK_RETRY_SCHEDULE ?? DEFAULT_RETRY_SCHEDULE)),
    secretsKey: parseSecretsKey(env.SECRETS_KEY),
    deliveryTimeoutMs: 10_000,
    leaseMs: 60_000,
    maxInFlight: 256,
    maxInFlightPerWebhook: 32,
    maxInFlightPerSubject: 64,
    disableAfterFailingMs: 5 * 86_400_000,
    maxWebhooksPerSubject: 20,
    heartbeatMs: 15_000,
    maxStreamsPerToken: 5,
    delivery: parseOnOff(env.WEBHOOK_DELIVERY, 'WEBHOOK_DELIVERY', 'send webhooks, the default'),
    brokers: Object.freeze(brokerSettings(env.BROKERS)),
  });
}

function brokerSettings(text: string | undefined): BrokerSetting[] {
  try {
    return parseBrokers(text);
  } catch (error) {
    if (error instanceof BrokerSettingError) throw new ConfigError(error.message);
    throw error;
  }
}

export function parseWorkers(text: string): number {
  const n = /^[0-9]{1,3}$/.test(text) ? Number(text) : 0;
  if (n < 1 || n > 64) throw new ConfigError(`WORKERS (or --workers) must be a number from 1 to 64; got "${text}"`);
  return n;
}

function parsePoolSize(text: string): number {
  const n = /^[0-9]{1,4}$/.test(text) ? Number(text) : 0;
  if (n < 1 || n > 1000) throw new ConfigError(`DATABASE_POOL_SIZE must be a number from 1 to 1000; got "${text}"`);
  return n;
}

const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

function parseJwt(env: NodeJS.ProcessEnv): JwtSettings | null {
  const jwksUrl = env.JWT_JWKS_URL;
  if (jwksUrl === undefined || jwksUrl === '') return null;
  if (!/^https?:\/\//.test(jwksUrl))
    throw new ConfigError(
      `JWT_JWKS_URL must be an http(s) URL; got "${jwksUrl.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/?#]*@/i, '$1…@')}"`,
    );
  const issuer = env.JWT_ISSUER;
  const audience = env.JWT_AUDIENCE;
  if (!issuer || !audience) {
    throw new ConfigError('JWT_JWKS_URL needs JWT_ISSUER and JWT_AUDIENCE too: a token is checked against both');
  }
  const algorithms = (env.JWT_ALGORITHMS ?? 'RS256,PS256,ES256,EdDSA').split(',').map((a) => a.trim());
  const unknown = algorithms.filter((a) => !JWT_ALGORITHMS.includes(a));
  if (unknown.length > 0 || algorithms.length === 0) {
    throw new ConfigError(`JWT_ALGORITHMS must be a list of ${JWT_ALGORITHMS.join(', ')}; got "${unknown.join(',')}"`);
  }
  return Object.freeze({ jwksUrl, issuer, audience, algorithms: Object.freeze(algorithms) });
}

function parseRedisUrl(text: string | undefined): string | null {
  if (text === undefined || text === '') return null;
  if (!/^rediss?:\/\//.test(text)) throw new ConfigError('REDIS_URL must start with redis:// or rediss://');
  return text;
}

/** A config for tests and tools: defaults, an in-memory store, no rate limit nor overload check, overridable. */
export function testConfig(overrides: Partial<Config> = {}): Config {
  return Object.freeze({
    ...loadConfig({
      DATABASE_URL: 'sqlite::memory:',
      RATE_LIMIT: 'off',
      LOG_LEVEL: 'silent',
      MAX_EVENT_LOOP_DELAY: 'off',
    }),
    ...overrides,
  });
}

/** Where `plant-store plants …` finds the server when neither --url nor PLANT_STORE_URL says. */
export const DEFAULT_CLIENT_URL = 'http://127.0.0.1:8080';

/** The settings of `plant-store plants …` (a client of a running server), before its flags. */
export function loadClientSettings(env: NodeJS.ProcessEnv = process.env): { url: string; token: string | undefined } {
  return { url: env.PLANT_STORE_URL || DEFAULT_CLIENT_URL, token: env.PLANT_STORE_TOKEN || undefined };
}
