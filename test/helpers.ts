import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../src/app.js';
import { TokenService } from '../src/auth/token.service.js';
import { type Config, testConfig } from '../src/config.js';
import { openSqlite } from '../src/store/sqlite/store.js';
import type { Store } from '../src/store/store.js';
import { openScratchPostgres } from './support/postgres.js';

export interface TestApp {
  readonly app: FastifyInstance;
  readonly store: Store;
  readonly tokens: TokenService;
  /** Moves the app's clock forward (token expiry, caches). */
  advance(ms: number): void;
  /** Issues a token and answers its secret. */
  token(subject: string, scopes: string[], expiresInMs?: number): Promise<string>;
  /** A request with `Authorization: Bearer <token>`; a body object is sent as JSON. */
  call(token: string | undefined, options: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

/** The engine the HTTP suites run on: SQLite, or PostgreSQL when TEST_ENGINE=postgres (test/postgres/). */
export const TEST_ENGINE = process.env.TEST_ENGINE === 'postgres' ? 'postgres' : 'sqlite';

/** A fresh, empty store of the engine under test. */
export function openTestStore(): Promise<Store> {
  return TEST_ENGINE === 'postgres' ? openScratchPostgres() : Promise.resolve(openSqlite(':memory:'));
}

/** A fresh app over a fresh store, built exactly as the server builds it. */
export async function makeApp(
  overrides: Partial<Config> = {},
  given?: Store,
  logStream?: { write(text: string): void },
): Promise<TestApp> {
  const store = given ?? (await openTestStore());
  let now = Date.UTC(2026, 0, 1);
  const clock = (): number => now;
  await store.migrate();
  const app = await buildApp({ config: testConfig(overrides), store, clock, ...(logStream && { logStream }) });
  await app.ready();
  const tokens = new TokenService(store, clock);
  return {
    app,
    store,
    tokens,
    advance: (ms) => void (now += ms),
    token: async (subject, scopes, expiresInMs) => (await tokens.create({ subject, scopes, expiresInMs })).token,
    call: (token, options) =>
      app.inject({
        ...options,
        headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...options.headers },
      }),
    close: async () => {
      await app.close();
      await store.close();
    },
  };
}

/** A JSON body exactly as written: for ids beyond 2^53 that a JS object cannot hold. */
export function json(text: string): Pick<InjectOptions, 'payload' | 'headers'> {
  return { payload: text, headers: { 'content-type': 'application/json' } };
}

export const READ_WRITE = ['plants:read', 'plants:write'];
