import type { AddressInfo } from 'node:net';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.js';
import { TokenService } from '../../src/auth/token.service.js';
import { type Config, testConfig } from '../../src/config.js';
import type { Store } from '../../src/store/store.js';

export interface ServedApp {
  readonly app: FastifyInstance;
  readonly config: Config;
  /** A token of alice's with the scopes asked for (plants:read and plants:write unless told). */
  readonly token: string;
  /** The port it listens on, 127.0.0.1 (0 unless `listen`). */
  readonly port: number;
  /** Every log line the app wrote. */
  readonly lines: string[];
  /** A request with alice's token; a payload is sent as JSON. */
  readonly call: (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: string) => Promise<LightMyRequestResponse>;
}

/**
 * The app over `store` as `serve` builds it, on the real clock (the database's clock and the
 * process's must agree, as in production), with a token of alice's; listening on 127.0.0.1 when
 * `listen`. `onClose` is handed the app's close (a test's t.after, or a list of cleanups).
 */
export async function servedApp(
  store: Store,
  onClose: (close: () => Promise<void>) => void,
  options: { config?: Partial<Config>; listen?: boolean; scopes?: readonly string[] } = {},
): Promise<ServedApp> {
  const lines: string[] = [];
  const config = testConfig(options.config ?? {});
  const app = await buildApp({ config, store, clock: Date.now, logStream: { write: (text) => void lines.push(text) } });
  onClose(() => app.close());
  if (options.listen === true) await app.listen({ port: 0, host: '127.0.0.1' });
  const scopes = [...(options.scopes ?? ['plants:read', 'plants:write'])];
  const token = (await new TokenService(store).create({ subject: 'alice', scopes })).token;
  const port = options.listen === true ? (app.server.address() as AddressInfo).port : 0;
  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: string) =>
    app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}`, ...(payload && { 'content-type': 'application/json' }) },
      ...(payload && { payload }),
    });
  return { app, config, token, port, lines, call };
}
