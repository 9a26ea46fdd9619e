// The platform's limit: node:http answering the same bytes as the service, with no framework, no
// auth and no storage, in plain JavaScript so that nothing stands between it and Node. Started by bench/bench.ts with the bodies to answer in BARE_BODIES (JSON).
import { createServer } from 'node:http';

/** @type {Record<string, string>} */
const bodies = JSON.parse(process.env.BARE_BODIES ?? '{}');
const headers = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

const server = createServer((request, response) => {
  const url = request.url ?? '';
  if (request.method === 'GET') {
    const body = bodies[url.startsWith('/plants?limit=100') ? 'list100' : 'list10'] ?? '[]';
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
