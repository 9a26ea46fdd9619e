import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { type Server, type Socket, createServer } from 'node:net';
import { after, test } from 'node:test';
import pg from 'pg';
import { cutConnection } from '../../src/store/postgres/host-probe.js';
import { HostRouter } from '../../src/store/postgres/hosts.js';
import { parsePostgresUrl } from '../../src/wire/postgres-url.js';

// The host router (src/store/postgres/hosts.ts, host-probe.ts) relies on fields of node-postgres'
// Client that are not its public API: where a connection goes (`host`, `port`,
// `connectionParameters`), its own connect timeout (`_connectionTimeoutMillis`), the socket under
// it (`connection.stream`), and `Client.prototype.query`, which it wraps. package.json's range for
// pg is the minor version these were read in; a pg that changes any of them fails here, loudly,
// before a failover finds out. No PostgreSQL is needed: a server that accepts and never answers
// stands in for a silent one.

const require = createRequire(import.meta.url);
// semver (a development dependency through npm's tree) ships no types: the three calls used, typed.
const semver = require('semver') as {
  satisfies(version: string, range: string): boolean;
  minVersion(range: string): { minor: number } | null;
  parse(version: string): { minor: number } | null;
  inc(version: string, release: 'minor'): string | null;
};
const installed = (require('pg/package.json') as { version: string }).version;
const declared = (require('../../package.json') as { dependencies: Record<string, string> }).dependencies.pg!;

const sockets: Socket[] = [];
const silent: Server = createServer((socket) => void sockets.push(socket)); // accepts, never answers
silent.listen(0, '127.0.0.1');
await once(silent, 'listening');
const port = (silent.address() as { port: number }).port;
after(() => {
  for (const socket of sockets) socket.destroy();
  silent.close();
});

test('the installed pg is within the range package.json names, and that range is one minor version', () => {
  assert.ok(semver.satisfies(installed, declared), `pg ${installed} outside ${declared}`);
  assert.ok(
    semver.minVersion(declared)!.minor === semver.parse(installed)!.minor &&
      !semver.satisfies(semver.inc(installed, 'minor')!, declared),
    `${declared} admits another minor version of pg than the one checked here`,
  );
});

test('a Client reads where to connect from host, port and connectionParameters, set after it was made', async () => {
  const client = new pg.Client({ connectionString: 'postgres://u@192.0.2.1:1/db', connectionTimeoutMillis: 500 });
  client.on('error', () => {});
  const fields = client as unknown as {
    host: string;
    port: number;
    connectionParameters: { host: string; port: number };
  };
  assert.equal(typeof fields.connectionParameters, 'object');
  fields.host = fields.connectionParameters.host = '127.0.0.1';
  fields.port = fields.connectionParameters.port = port;
  const accepted = sockets.length;
  await assert.rejects(client.connect(), /timeout expired/, 'its own connect timeout, in the words errors.ts reads');
  assert.equal(sockets.length, accepted + 1, 'it connected to the address set, not to the URL’s');
});

test('_connectionTimeoutMillis set after construction is the connect timeout used', async () => {
  const client = new pg.Client({
    connectionString: `postgres://u@127.0.0.1:${port}/db`,
    connectionTimeoutMillis: 60_000,
  });
  client.on('error', () => {});
  const fields = client as unknown as { _connectionTimeoutMillis: number };
  assert.equal(fields._connectionTimeoutMillis, 60_000);
  fields._connectionTimeoutMillis = 200;
  await assert.rejects(client.connect(), /timeout expired/);
});

test('cutting connection.stream ends a connection to a silent server at once, with the error given', async () => {
  const client = new pg.Client({ connectionString: `postgres://u@127.0.0.1:${port}/db` });
  client.on('error', () => {});
  const stream = (client as unknown as { connection: { stream: Socket } }).connection.stream;
  assert.equal(typeof stream.destroy, 'function');
  const connecting = client.connect();
  await once(silent, 'connection');
  const ended = once(client, 'end');
  cutConnection(client, Object.assign(new Error('cut by the test'), { code: 'ETIMEDOUT' }));
  await assert.rejects(connecting, /cut by the test/);
  await ended;
  assert.ok(stream.destroyed);
});

test('the router’s Client wraps Client.prototype.query, and its answers still come through', async () => {
  const router = new HostRouter(
    parsePostgresUrl(`postgres://u@127.0.0.1:${port}/db?target_session_attrs=read-write`),
    500,
  );
  const Client = router.Client;
  assert.equal(typeof pg.Client.prototype.query, 'function');
  const own = Object.getOwnPropertyDescriptor(Client.prototype, 'query')?.value as unknown;
  assert.equal(typeof own, 'function', 'the routed Client has its own query');
  assert.notEqual(own, Object.getOwnPropertyDescriptor(pg.Client.prototype, 'query')?.value);
  const client = new Client({ connectionString: `postgres://u@127.0.0.1:${port}/db` });
  client.on('error', () => {});
  await client.end(); // never connected: a closed client answers every query with an error
  // Through the wrapper, as a promise and to a callback.
  await assert.rejects(client.query('SELECT 1'), /Client was closed and is not queryable/);
  const viaCallback = await new Promise<Error | null>(
    (resolve) => void client.query('SELECT 1', (error: Error | null) => resolve(error)),
  );
  assert.match(String(viaCallback), /not queryable/);
  router.close();
});
