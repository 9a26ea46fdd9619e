// The platform's limit: node:http answering the same bytes as the service, with no framework, no
// auth and no storage, in plain JavaScript so that nothing stands between it and Node. Started by bench/bench.ts with the bodies to answer in BARE_BODIES (JSON).
import { createServer } from 'node:http';

/** @type {Record<string, string>} */
const bodies = JSON.parse(process.env.BARE_BODIES ?? '{}');
const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };
// The 100-plant page as the service gzips it (bench.ts's compression rows); base64 in BARE_BODIES.
const gzipped = bodies.list100gzip === undefined ? undefined : Buffer.from(bodies.list100gzip, 'base64');

/**
 * A request header, from the raw list Node keeps anyway: `request.headers` would build an object on
 * first use, a cost the other rows' bare answers never paid.
 * @param {import('node:http').IncomingMessage} request
 * @param {string} name lower case
 */
function rawHeader(request, name) {
  const raw = request.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]?.toLowerCase() === name) return raw[i + 1];
  return undefined;
}

const server = createServer((request, response) => {
  const url = request.url ?? '';
  if (request.method === 'GET') {
    const big = url.startsWith('/plants?limit=100');
    if (big && gzipped !== undefined) {
      if (rawHeader(request, 'if-none-match') !== undefined)
        return void response.writeHead(304, { 'cache-control': 'no-store' }).end();
      if (/gzip/.test(rawHeader(request, 'accept-encoding') ?? '')) {
        const gzipHeaders = { ...headers, 'content-encoding': 'gzip', 'content-length': gzipped.length };
        return void response.writeHead(200, gzipHeaders).end(gzipped);
      }
    }
    const body = bodies[big ? 'list100' : 'list10'] ?? '[]';
    response.writeHead(200, { ...headers, 'content-length': Buffer.byteLength(body) }).end(body);
  } else if (request.method === 'POST') {
    request.resume(); // read the body, as the service must
    request.on('end', () => {
      const body = bodies.created ?? '{}';
      response.writeHead(200, { ...headers, 'content-length': Buffer.byteLength(body) }).end(body);
    });
  } else {
    response.writeHead(204, { 'cache-control': 'no-store' }).end();
  }
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.once('SIGTERM', () => server.close(() => process.exit(0)));
