import { once } from 'node:events';
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http';
import type { TestContext } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { buildApp } from '../../src/app.js';
import { TokenService } from '../../src/auth/token.service.js';
import { type EventSettings, testConfig } from '../../src/config.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { SecretBox } from '../../src/webhooks/secret-box.js';
import { WebhookSender } from '../../src/webhooks/sender.js';
import assert from 'node:assert/strict';
import { type TestApp, json, openTestStore } from '../helpers.js';

// An app and a dispatcher over one store of the engine under test, sharing one clock that runs
// with real time (so that the standardwebhooks package accepts the signatures' timestamps) and
// that a test can move forward. Receivers are servers on 127.0.0.1 (WEBHOOK_ALLOW_PRIVATE on).

export interface Request {
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export interface Answer {
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly body?: string | Buffer;
}

/** A receiver that records every request and answers what `answer` says (204 by default). */
export class TestReceiver {
  readonly requests: Request[] = [];
  answer: (request: Request) => Answer = () => ({ status: 204 });
  private server: Server | undefined;
  private port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks/plants`;
  }

  async start(t: TestContext): Promise<this> {
    const server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const request = { headers: req.headers, body };
        this.requests.push(request);
        const answer = this.answer(request);
        res.writeHead(answer.status, answer.headers).end(answer.body);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    this.port = (server.address() as { port: number }).port;
    this.server = server;
    t.after(async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    });
    return this;
  }
}

export { eventually } from '../support/eventually.js';

/** POST /webhooks for `url` with `token`: the new webhook's id (a 201 asserted). */
export async function addWebhook(h: TestApp, token: string, url: string): Promise<string> {
  const res = await h.call(token, { method: 'POST', url: '/webhooks', ...json(JSON.stringify({ url })) });
  assert.equal(res.statusCode, 201, res.payload);
  return (JSON.parse(res.payload) as { id: string }).id;
}

export interface DeliveryHarness extends TestApp {
  readonly dispatcher: Dispatcher;
  readonly settings: EventSettings;
  /** The app's and the dispatcher's clock. */
  now(): number;
  /** The lines the app logged, parsed, and what the dispatcher logged at warn. */
  readonly appLog: Array<Record<string, unknown>>;
  readonly dispatcherWarnings: Array<Record<string, unknown>>;
}

export async function deliveryHarness(
  t: TestContext,
  retrySchedule: readonly number[] = [0, 60_000],
): Promise<DeliveryHarness> {
  const store = await openTestStore();
  await store.migrate();
  let offset = 0;
  const now = (): number => Date.now() + offset;
  const settings: EventSettings = { ...testConfig().events, allowPrivateTargets: true, retrySchedule };
  const appLog: Array<Record<string, unknown>> = [];
  const app = await buildApp({
    config: testConfig({ events: settings, logLevel: 'warn' }),
    store,
    clock: now,
    logStream: {
      write: (text: string) => {
        for (const line of text.split('\n').filter(Boolean)) appLog.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  });
  await app.ready();
  const dispatcherWarnings: Array<Record<string, unknown>> = [];
  const log = {
    warn: (fields: Record<string, unknown>, msg: string) => dispatcherWarnings.push({ ...fields, msg }),
    info: () => {},
    error: () => {},
    debug: () => {},
  } as unknown as FastifyBaseLogger;
  const sender = new WebhookSender({ allowPrivate: true, timeoutMs: 5000 });
  const dispatcher = new Dispatcher(store, sender, new SecretBox(null), settings, log, undefined, now);
  const tokens = new TokenService(store, now);
  const h: DeliveryHarness = {
    app,
    store,
    tokens,
    dispatcher,
    settings,
    now,
    appLog,
    dispatcherWarnings,
    advance: (ms) => void (offset += ms),
    token: async (subject, scopes) => (await tokens.create({ subject, scopes })).token,
    call: (token, options) =>
      app.inject({
        ...options,
        headers: { ...(token === undefined ? {} : { authorization: `Bearer ${token}` }), ...options.headers },
      }),
    close: async () => {
      await dispatcher.drain();
      await sender.close();
      await app.close();
      await store.close();
    },
  };
  t.after(() => h.close());
  return h;
}
