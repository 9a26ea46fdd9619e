// The floor of any HTTP layer for this service: the three plant operations on bare
// node:http with only the parts every request keeps, taken from the service's own build (dist/):
// the store with its event row, group commit and WAL + synchronous=FULL (src/store/), the bearer
// token checked through the token cache (TokenAuthenticator), the request id, the request log line
// (RequestLog's requestLine, through the service's TurnLogStream), the request metrics
// (Metrics.observe), the list page's entity tag (Representation) and the service's headers. No
// framework: no routing, hooks, schema validation or serializer, no rate limit, CORS, compression
// or overload guard. It does less than the service (a POST's body is checked only for what the
// store needs), so what it costs is a lower bound on what the service could cost with a second,
// hand-written HTTP layer in place of Fastify: the question bench/cost.ts's last column answers.
//
// Started by bench/cost.ts beside the others, in plain JavaScript as the bare server: on SQLite, on
// a file of its own into which it copies the service's tokens (so that wrk's token is accepted); on
// PostgreSQL, on the service's database (its plants have ids of their own):
//
//   DATABASE_URL=sqlite:/tmp/k.db TOKENS_FROM=/tmp/service.db PORT=0 node bench/kept-parts.mjs
//   DATABASE_URL=postgres://…/plant_store_cost_1 PORT=0 node bench/kept-parts.mjs
// KEPT_OFF=log,metrics,auth,id,store leaves parts out, to see what each costs without a framework.
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { URLSearchParams } from 'node:url';
import Database from 'better-sqlite3';
import pino from 'pino';
import { TokenAuthenticator } from '../dist/auth/authenticator.js';
import { bearerCredential } from '../dist/auth/authenticate.js';
import { loadConfig } from '../dist/config.js';
import { HttpError, errorBody } from '../dist/errors.js';
import { stdoutLogStream } from '../dist/http/log-stream.js';
import { requestId } from '../dist/http/protocol.js';
import { Representation, noneMatch } from '../dist/http/representation.js';
import { redactUrl, requestLine } from '../dist/http/request-log.js';
import { PlantService } from '../dist/plants/plant.service.js';
import { openStore } from '../dist/store/open-store.js';
import { Metrics } from '../dist/system/metrics.js';

const config = loadConfig(process.env);
const tokensFrom = process.env.TOKENS_FROM;
if (config.database.engine === 'sqlite' && !tokensFrom) throw new Error('TOKENS_FROM: the SQLite file with the tokens');
// As src/server.ts opens it: a lock held elsewhere is waited for from the event loop.
const store = await openStore(config.database, { sqlite: { locks: 'event-loop' } });
await store.migrate();
if (config.database.engine === 'sqlite') {
  const copy = new Database(config.database.path);
  copy.prepare('ATTACH DATABASE ? AS source').run(tokensFrom);
  copy.exec('INSERT INTO main.api_tokens SELECT * FROM source.api_tokens');
  copy.close();
}

/** KEPT_OFF: the parts left out (see the top of this file). */
const off = new Set((process.env.KEPT_OFF ?? '').split(','));

const authenticator = new TokenAuthenticator(store, Date.now, config.tokenCacheMs);
const service = new PlantService(store);
// KEPT_OFF=store: the answers a create and a delete would give, without the store.
const plants = off.has('store')
  ? { list: (p, r) => service.list(p, r), create: async (_p, { name, tag }) => ({ name, tag }), delete: async () => {} }
  : service;
const metrics = new Metrics(store, { clock: Date.now, openStreams: () => 0, log: () => {} });
// As Fastify makes the app's logger and each request's child (bindings pid, hostname, reqId).
const logStream = stdoutLogStream();
const logger = pino({ level: config.logLevel }, logStream);
const JSON_TYPE = 'application/json; charset=utf-8';
let admitted; // KEPT_OFF=auth: the first principal, reused without a check
/** Each page's body and entity tag, made once, as the service's route keeps them. */
const pages = new WeakMap();

/**
 * @param {import('node:http').IncomingMessage} request
 * @param {import('node:http').ServerResponse} response
 */
function answer(request, response, id, started, status, headers, body, route, principal) {
  headers['x-request-id'] = id;
  headers['cache-control'] = 'no-store';
  headers['x-content-type-options'] = 'nosniff';
  if (body !== undefined) {
    headers['content-type'] = JSON_TYPE;
    headers['content-length'] = Buffer.byteLength(body);
  }
  response.writeHead(status, headers).end(body);
  const seconds = (performance.now() - started) / 1000;
  if (!off.has('metrics')) metrics.observe(request.method, route, status, seconds);
  if (off.has('log')) return;
  const line = requestLine(
    logger.child({ reqId: id }),
    request.method,
    redactUrl(request.url),
    status,
    Math.round(seconds * 100_000) / 100,
    principal,
  );
  logStream.write(line);
}

const failed = (request, response, id, started, route, principal) => (error) => {
  const status = error instanceof HttpError ? error.statusCode : 500;
  answer(
    request,
    response,
    id,
    started,
    status,
    {},
    JSON.stringify(errorBody(status, error.message)),
    route,
    principal,
  );
};

function list(request, response, id, started, principal) {
  const url = request.url;
  const limit = Number(new URLSearchParams(url.slice(url.indexOf('?') + 1)).get('limit') ?? 10);
  const refused = failed(request, response, id, started, '/plants', principal);
  plants.list(principal, { limit }).then((page) => {
    const link = page.next === undefined ? undefined : `</plants?limit=${limit}&cursor=${page.next}>; rel="next"`;
    let body = pages.get(page.plants);
    if (body === undefined || body.metadata !== link)
      pages.set(page.plants, (body = new Representation(JSON.stringify(page.plants), JSON_TYPE, link)));
    const headers = { etag: body.etag };
    if (link !== undefined) headers.link = link;
    const condition = request.headers['if-none-match'];
    if (condition !== undefined && noneMatch(condition, body.etag))
      return answer(request, response, id, started, 304, headers, undefined, '/plants', principal);
    answer(request, response, id, started, 200, headers, body.text, '/plants', principal);
  }, refused);
}

function create(request, response, id, started, principal) {
  const refused = failed(request, response, id, started, '/plants', principal);
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    let input;
    try {
      const text = Buffer.concat(chunks).toString();
      const { name, tag } = JSON.parse(text);
      // The id as an int64 (the service's strict JSON parser keeps its digits); the rest as the store needs it.
      const digits = /"id"\s*:\s*(-?\d+)/.exec(text)?.[1];
      if (digits === undefined || typeof name !== 'string' || (tag !== undefined && typeof tag !== 'string'))
        throw new HttpError(400, 'the body is not a plant');
      input = { id: BigInt(digits), name, tag };
    } catch (error) {
      return refused(error instanceof HttpError ? error : new HttpError(400, 'the body is not JSON'));
    }
    plants.create(principal, input).then((plant) => {
      answer(request, response, id, started, 200, {}, JSON.stringify(plant), '/plants', principal);
    }, refused);
  });
}

function remove(request, response, id, started, principal) {
  const refused = failed(request, response, id, started, '/plants/:id', principal);
  let plant;
  try {
    plant = BigInt(request.url.slice('/plants/'.length));
  } catch {
    return refused(new HttpError(400, 'the id is not an integer'));
  }
  plants.delete(principal, plant).then(() => {
    answer(request, response, id, started, 204, {}, undefined, '/plants/:id', principal);
  }, refused);
}

const route = { GET: list, POST: create, DELETE: remove };

const server = createServer((request, response) => {
  const started = performance.now();
  const id = off.has('id') ? 'id' : requestId(request);
  const credential = bearerCredential(request.headers.authorization);
  const handle = route[request.method];
  const admit = (principal) => {
    if (principal === undefined || !('scopes' in principal))
      return failed(request, response, id, started, undefined, undefined)(new HttpError(401, 'no valid token'));
    handle(request, response, id, started, principal);
  };
  const found = admitted ?? (credential === undefined ? undefined : authenticator.authenticate(credential));
  if (off.has('auth') && found !== undefined && !(found instanceof Promise)) admitted = found;
  if (found instanceof Promise) found.then(admit, failed(request, response, id, started));
  else admit(found);
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.once('SIGTERM', () => server.close(() => store.close().then(() => process.exit(0))));
