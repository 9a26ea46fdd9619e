import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { type Server, createServer, get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ServerProcess, mintCliToken, startServer, callServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort, scratchSchema, stopSharedPostgres } from '../support/postgres.js';
import { Receiver } from './webhook-receiver.js';

// OpenTelemetry traces exported over OTLP/HTTP by real `plant-store serve`
// processes to a collector this test runs on 127.0.0.1, which decodes what arrives.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-tracing-'));
after(() => rmSync(dir, { recursive: true, force: true }));

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: Array<{ key: string; value: AnyValue }>;
}
interface Span {
  readonly scope: string;
  readonly service: string | undefined;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly attributes: Record<string, string | number | boolean | undefined>;
}

/** An OTLP/HTTP collector: JSON bodies decoded into spans, protobuf bodies kept as bytes. */
class Collector {
  readonly spans: Span[] = [];
  readonly bodies: Array<{ contentType: string; path: string; body: Buffer }> = [];
  /** `drop`: every export's connection is cut as it arrives, as by a collector that went away. */
  mode: 'take' | 'drop' = 'take';
  /** The exports that arrived, taken or dropped. */
  attempts = 0;
  private server: Server | undefined;
  port = 0;

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      this.attempts += 1;
      if (this.mode === 'drop') return void req.socket.destroy();
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const contentType = String(req.headers['content-type']);
        this.bodies.push({ contentType, path: String(req.url), body });
        if (contentType.startsWith('application/json')) this.decode(body.toString('utf8'));
        res.writeHead(200, { 'content-type': contentType }).end(contentType.includes('json') ? '{}' : '');
      });
    });
    this.server.listen(0, '127.0.0.1');
    await once(this.server, 'listening');
    this.port = (this.server.address() as { port: number }).port;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private decode(text: string): void {
    const request = JSON.parse(text) as {
      resourceSpans: Array<{
        resource: { attributes: OtlpSpan['attributes'] };
        scopeSpans: Array<{ scope: { name: string }; spans: OtlpSpan[] }>;
      }>;
    };
    for (const resourceSpans of request.resourceSpans) {
      const service = flatten(resourceSpans.resource.attributes)['service.name'];
      for (const { scope, spans } of resourceSpans.scopeSpans)
        for (const span of spans)
          this.spans.push({
            scope: scope.name,
            service: typeof service === 'string' ? service : undefined,
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId || undefined,
            name: span.name,
            attributes: flatten(span.attributes),
          });
    }
  }

  /** Waits until a span satisfies `predicate`; a deadline, not a speed. */
  span(predicate: (span: Span) => boolean, what: string): Promise<Span> {
    return eventually(
      async () => this.spans.find(predicate),
      () => `a span ${what}; got: ${this.spans.map((s) => s.name).join(', ')}`,
      15_000,
    );
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    this.server?.close();
  }
}

function flatten(attributes: OtlpSpan['attributes']): Span['attributes'] {
  const flat: Span['attributes'] = {};
  for (const { key, value } of attributes) {
    const v = value.stringValue ?? value.intValue ?? value.boolValue ?? value.doubleValue;
    flat[key] = typeof v === 'string' && /^\d+$/.test(v) && value.intValue !== undefined ? Number(v) : v;
  }
  return flat;
}

const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';

/** The server's `plant-store serving` line. */
function startupLine(server: ServerProcess): Record<string, unknown> {
  const line = server
    .logs()
    .split('\n')
    .find((l) => l.includes('"msg":"plant-store serving"'));
  assert.ok(line, `a start-up line: ${server.logs().slice(0, 2000)}`);
  return JSON.parse(line) as Record<string, unknown>;
}

/** The server's log lines with this `msg`, parsed. */
function logLines(server: ServerProcess, msg: string): Array<Record<string, unknown>> {
  return server
    .logs()
    .split('\n')
    .filter((line) => line.includes(`"msg":${JSON.stringify(msg)}`))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** Every span's ancestors up to the root, by id. */
function ancestors(spans: readonly Span[], span: Span): string[] {
  const byId = new Map(spans.map((s) => [s.spanId, s]));
  const chain: string[] = [];
  for (let at = span.parentSpanId; at !== undefined; at = byId.get(at)?.parentSpanId) chain.push(at);
  return chain;
}

for (const engine of ['sqlite', 'postgres'] as const) {
  describe(`tracing with OTEL_EXPORTER_OTLP_ENDPOINT set (${engine})`, () => {
    const collector = new Collector();
    const receiver = new Receiver();
    let server: ServerProcess;
    let token: string;
    let scratch: { url: string; drop(): Promise<void> } | undefined;

    before(async () => {
      await collector.start();
      await receiver.start();
      let database = `sqlite:${join(dir, 'traced.db')}`;
      if (engine === 'postgres') {
        scratch = await scratchSchema();
        database = scratch.url;
      }
      const env = {
        DATABASE_URL: database,
        WEBHOOK_ALLOW_PRIVATE: '1',
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_SERVICE_NAME: `plant-store-${engine}`,
      };
      token = await mintCliToken(env, 'alice', SCOPES);
      server = await startServer(env);
    });
    after(async () => {
      await server?.stop();
      await receiver.stop();
      await collector.stop();
      await scratch?.drop();
    });

    test('the start-up line says where the spans go', () => {
      assert.equal(startupLine(server).tracing, `${collector.endpoint}/v1/traces`);
    });

    test('a request continues the caller’s traceparent, named by its route, with its subject and status', async () => {
      const created = await callServer(server, token, 'POST', '/plants', '{"id":41,"name":"Fern"}', {
        traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
      });
      assert.equal(created.status, 200, created.text);
      const span = await collector.span((s) => s.traceId === TRACE_ID && s.name === 'POST /plants', 'POST /plants');
      assert.equal(span.parentSpanId, PARENT_ID);
      assert.equal(span.service, `plant-store-${engine}`);
      assert.equal(span.attributes['http.route'], '/plants');
      assert.equal(span.attributes['http.response.status_code'], 200);
      assert.equal(span.attributes['enduser.id'], 'alice');
      assert.equal(
        span.attributes['plant_store.request_id'],
        created.headers.get('x-request-id'),
        'the answer’s X-Request-Id',
      );

      const removed = await callServer(server, token, 'DELETE', '/plants/41');
      assert.equal(removed.status, 204);
      const deleted = await collector.span((s) => s.name === 'DELETE /plants/:id', 'DELETE /plants/:id');
      assert.notEqual(deleted.traceId, TRACE_ID, 'a request without traceparent starts a trace of its own');
      assert.equal(deleted.parentSpanId, undefined);
      assert.equal(deleted.attributes['http.response.status_code'], 204);
    });

    test('every statement of a request is a span in its trace; no token reaches the collector', async () => {
      const created = await callServer(server, token, 'POST', '/plants', '{"id":42,"name":"Ivy"}', {
        traceparent: `00-${TRACE_ID.replace(/^4/, '5')}-${PARENT_ID}-01`,
      });
      assert.equal(created.status, 200);
      const traceId = TRACE_ID.replace(/^4/, '5');
      const request = await collector.span((s) => s.traceId === traceId && s.name === 'POST /plants', 'the request');
      const system = engine === 'sqlite' ? 'sqlite' : 'postgresql';
      const insert = await collector.span(
        (s) =>
          s.traceId === traceId &&
          s.attributes['db.system.name'] === system &&
          /INSERT/i.test(String(s.attributes['db.query.text'] ?? s.attributes['db.statement'] ?? s.name)),
        `an INSERT statement (${system})`,
      );
      assert.ok(ancestors(collector.spans, insert).includes(request.spanId), 'the statement is under the request');
      // The token was looked up by a statement too, in the first request's trace (then it is cached).
      await collector.span(
        (s) =>
          s.traceId === TRACE_ID && /api_tokens|tokenById/.test(`${s.name} ${String(s.attributes['db.query.text'])}`),
        'the token lookup',
      );
      // A token a caller puts in the query string or the path is redacted, as in the request log.
      await callServer(server, token, 'GET', `/plants?access_token=${token}&limit=5`);
      await callServer(server, token, 'GET', `/plants/${token}`);
      const inQuery = await collector.span(
        (s) => String(s.attributes['url.query'] ?? '').includes('limit=5'),
        'the request with a token in its query',
      );
      assert.equal(inQuery.attributes['url.query'], 'access_token=[redacted]&limit=5');
      await collector.span(
        (s) => s.attributes['url.path'] === '/plants/[redacted]',
        'the request with a token in its path',
      );
      const everything = collector.bodies.map((b) => b.body.toString('utf8')).join('\n');
      assert.ok(!everything.includes(token), 'the bearer token is in no span');
      assert.ok(!everything.includes(token.slice(token.indexOf('_') + 1, token.length - 8)), 'nor part of its secret');
    });

    test('a webhook delivery is a span, and the receiver gets its traceparent', async () => {
      const hook = await callServer(server, token, 'POST', '/webhooks', JSON.stringify({ url: receiver.url }));
      assert.equal(hook.status, 201, hook.text);
      const webhook = JSON.parse(hook.text) as { id: string; secret: string };
      receiver.secret = webhook.secret;
      assert.equal((await callServer(server, token, 'POST', '/plants', '{"id":43,"name":"Moss"}')).status, 200);
      await receiver.until((received) => received.some((r) => r.body.includes('"Moss"')));
      const delivered = receiver.received.find((r) => r.body.includes('"Moss"'))!;
      assert.ok(delivered.verified, 'the signature still verifies');
      const traceparent = String(delivered.headers.traceparent);
      const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/.exec(traceparent);
      assert.ok(m, `a W3C traceparent header: ${traceparent}`);
      const span = await collector.span((s) => s.spanId === m[2], 'the delivery span the traceparent names');
      assert.equal(span.name, 'webhook delivery');
      assert.equal(span.traceId, m[1]);
      assert.equal(span.attributes['plant_store.webhook.id'], webhook.id);
      assert.equal(span.attributes['plant_store.event.type'], 'plant.created');
      assert.equal(span.attributes['http.response.status_code'], 200);
    });
  });
}

test('the default protocol is OTLP/HTTP protobuf to /v1/traces', async (t) => {
  const collector = new Collector();
  await collector.start();
  t.after(() => collector.stop());
  const env = {
    DATABASE_URL: `sqlite:${join(dir, 'protobuf.db')}`,
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
    OTEL_BSP_SCHEDULE_DELAY: '100',
  };
  const token = await mintCliToken(env, 'bob', 'plants:read');
  const server = await startServer(env);
  t.after(() => server.stop());
  const listed = await callServer(server, token, 'GET', '/plants', undefined, {
    traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`,
  });
  assert.equal(listed.status, 200);
  const traceBytes = Buffer.from(TRACE_ID, 'hex');
  const body = await eventually(
    async () => collector.bodies.find((b) => b.body.includes(traceBytes)),
    () => `an export carrying the trace id (${collector.bodies.length} exports)`,
    15_000,
  );
  assert.equal(body.path, '/v1/traces');
  assert.equal(body.contentType, 'application/x-protobuf');
  // Protobuf keeps strings as they are: the span's name and the service's are in the bytes.
  assert.ok(body.body.includes(Buffer.from('GET /plants')));
  assert.ok(body.body.includes(Buffer.from('plant-store')), 'service.name defaults to plant-store');
});

test('without an OTLP endpoint nothing is exported and no span header is sent', async (t) => {
  const receiver = new Receiver();
  await receiver.start();
  t.after(() => receiver.stop());
  const env = { DATABASE_URL: `sqlite:${join(dir, 'untraced.db')}`, WEBHOOK_ALLOW_PRIVATE: '1' };
  const token = await mintCliToken(env, 'carol', SCOPES);
  const server = await startServer({ ...env, OTEL_EXPORTER_OTLP_ENDPOINT: '' });
  t.after(() => server.stop());
  assert.equal(startupLine(server).tracing, 'off');
  const hook = await callServer(server, token, 'POST', '/webhooks', JSON.stringify({ url: receiver.url }));
  receiver.secret = (JSON.parse(hook.text) as { secret: string }).secret;
  assert.equal((await callServer(server, token, 'POST', '/plants', '{"id":44,"name":"Sage"}')).status, 200);
  await receiver.until((received) => received.length === 1);
  assert.equal(receiver.received[0]!.headers.traceparent, undefined);
});

const UNREACHABLE = 'tracing: the collector is unreachable: spans are dropped until it answers';
const REACHABLE = 'tracing: the collector is reachable again';

test('a collector that goes away is one warning, however many batches fail, and one line when it is back', async (t) => {
  const collector = new Collector();
  await collector.start();
  t.after(() => collector.stop());
  const server = await startServer({
    DATABASE_URL: `sqlite:${join(dir, 'away.db')}`,
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '100',
    // An export gives up at once instead of retrying for 10 s: each batch is one attempt here.
    OTEL_EXPORTER_OTLP_TIMEOUT: '300',
  });
  t.after(() => server.stop());

  collector.mode = 'drop';
  // Three batches, one after another: a request (its 401 is a span) waits for the last to arrive.
  for (let batch = 1; batch <= 3; batch++) {
    assert.equal((await fetch(`${server.url}/plants?batch=${batch}`)).status, 401);
    await eventually(
      async () => (collector.attempts >= batch ? true : undefined),
      () => `export ${batch} to reach the collector (${collector.attempts} did)`,
    );
  }
  const [warning] = await eventually(
    async () => (logLines(server, UNREACHABLE).length > 0 ? logLines(server, UNREACHABLE) : undefined),
    () => `the warning that the collector is unreachable: ${server.logs().slice(-2000)}`,
  );
  assert.equal(warning!.level, 40);
  assert.equal(warning!.endpoint, `${collector.endpoint}/v1/traces`);
  assert.equal(typeof warning!.reason, 'string');

  collector.mode = 'take';
  assert.equal((await fetch(`${server.url}/plants?batch=back`)).status, 401);
  await collector.span((s) => s.attributes['url.query'] === 'batch=back', 'the request after the collector is back');
  const [back] = await eventually(
    async () => (logLines(server, REACHABLE).length > 0 ? logLines(server, REACHABLE) : undefined),
    () => `the line saying the collector is reachable again: ${server.logs().slice(-2000)}`,
  );
  assert.ok(Number(back!.lostSpans) >= 3, `the spans of the dropped batches: ${JSON.stringify(back)}`);
  assert.equal(logLines(server, UNREACHABLE).length, 1, 'one warning for the outage, not one per batch');
  assert.equal(logLines(server, REACHABLE).length, 1);
});

test('a stop with the collector unreachable ends within SHUTDOWN_GRACE: exit 0, stopped cleanly; no credential logged', async (t) => {
  const port = await freePort(); // nothing listens there: every connection is refused
  const server = await startServer({
    DATABASE_URL: `sqlite:${join(dir, 'refused.db')}`,
    // Credentials in the URL and in the headers stay out of the log.
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://collector-user:url-secret@127.0.0.1:${port}/v1/traces?api_key=query-secret`,
    OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=header-secret',
    SHUTDOWN_GRACE: '2s',
  });
  t.after(() => server.stop());
  assert.equal(startupLine(server).tracing, `http://127.0.0.1:${port}/v1/traces`);
  // A span waits in the queue (exported every 5 s by default); the stop tries to export it. The
  // request's connection closes after it, so the stop has no idle connection to wait out.
  const status = await new Promise<number | undefined>((resolve, reject) =>
    get(`${server.url}/plants`, { agent: false }, (res) => res.resume().on('end', () => resolve(res.statusCode))).on(
      'error',
      reject,
    ),
  );
  assert.equal(status, 401);

  assert.equal(await server.stop(), 0, server.logs().slice(-2000));
  const logs = server.logs();
  assert.match(logs, /"msg":"stopped cleanly"/);
  assert.match(logs, /"msg":"tracing: the last spans (were not exported in time|could not be exported)"/);
  assert.doesNotMatch(logs, /shutdown grace period over/);
  for (const secret of ['url-secret', 'query-secret', 'header-secret', 'collector-user'])
    assert.ok(!logs.includes(secret), `${secret} is not logged`);
});
