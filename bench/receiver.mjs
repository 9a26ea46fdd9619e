// A webhook receiver for bench/events.ts: node:http answering every delivery 200 at once, with
// no verification and no work, so that what is measured is the service's side. It notes when each
// delivery arrived (Date.now(), the same clock as the service's) and which plant it was for (the
// payload's id, kept as text: ids go past 2^53).
//
// The harness reads and clears what it noted over the same port, at paths no webhook uses:
//   GET /__stats     {"count", "unique", "first", "last"}: deliveries since the last reset (count
//                    with repeats; first: the first arrival; last: the latest plant seen the first time)
//   GET /__arrivals  [["<plant id>", <ms>], ...]: the first arrival of each plant
//   GET /__reset     forget everything
// Prints "listening <port>" once it listens. PORT (default 0: any free port).
import { createServer } from 'node:http';

/** @type {Map<string, number>} the first arrival of each plant id */
let arrivals = new Map();
let count = 0;
let first = 0;
let last = 0;
const ID = /"id":(-?\d+)/;

const json = (response, value) => {
  const body = JSON.stringify(value);
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  response.end(body);
};

const server = createServer((request, response) => {
  if (request.method === 'GET') {
    if (request.url === '/__stats') return json(response, { count, unique: arrivals.size, first, last });
    if (request.url === '/__arrivals') return json(response, [...arrivals]);
    if (request.url === '/__reset') {
      arrivals = new Map();
      count = first = last = 0;
      return json(response, { ok: true });
    }
    response.writeHead(404).end();
    return;
  }
  let body = '';
  request.setEncoding('utf8');
  request.on('data', (chunk) => (body += chunk));
  request.on('end', () => {
    const now = Date.now();
    count += 1;
    if (first === 0) first = now;
    const id = ID.exec(body)?.[1];
    if (id !== undefined && !arrivals.has(id)) {
      arrivals.set(id, now);
      last = now;
    }
    response.writeHead(200, { 'content-length': '0' }).end();
  });
});
server.keepAliveTimeout = 60_000;

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
