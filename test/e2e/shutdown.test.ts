import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ServerProcess, exitWithin, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-shutdown-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * Until `predicate` holds for the server's logs, polled; fails after 20 s (a deadline, not a speed),
 * saying whether the server is still running and what it logged last. A poll keeps this test
 * process's event loop alive while it waits, so a server that exits without the line fails the
 * test instead of leaving node:test an empty loop (which cancels every test of the file left).
 */
function logged(server: ServerProcess, what: string, predicate: (logs: string) => boolean): Promise<true> {
  return eventually(
    async () => (predicate(server.logs()) ? true : undefined),
    () =>
      `the server logged ${what} (it has ${server.child.exitCode === null && server.child.signalCode === null ? 'not exited' : `exited: ${server.child.exitCode ?? server.child.signalCode}`}); its log ends: ${server.logs().slice(-1500)}`,
    20_000,
  );
}

test(
  'SIGTERM lets an in-flight request finish with 200, closes its connection, and exits 0',
  { timeout: 60_000 },
  async (t) => {
    const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}` };
    const token = await mintCliToken(env, 'alice', 'plants:write');
    const server = await startServer({ ...env, LOG_LEVEL: 'debug' }); // 'incoming request' is a debug line
    t.after(() => server.stop());

    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    t.after(() => socket.destroy());
    await once(socket, 'connect');
    let response = '';
    socket.on('data', (chunk: Buffer) => void (response += chunk.toString()));

    const body = '{"id":1,"name":"slow fern"}';
    socket.write(
      `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nX-Request-Id: in-flight-1\r\n\r\n${body.slice(0, 10)}`,
    );
    // The request is in flight once the server has logged it; only then does the signal arrive.
    await logged(server, 'the request in-flight-1', (logs) => logs.includes('"reqId":"in-flight-1"'));
    const exited = exitWithin(server, 15_000);
    server.child.kill('SIGTERM');
    await logged(server, 'shutting down', (logs) => logs.includes('shutting down'));
    socket.write(body.slice(10));

    await once(socket, 'close');
    assert.match(response, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(response, /\r\nconnection: close\r\n/i);
    assert.ok(response.endsWith('{"name":"slow fern"}'));
    assert.equal(await exited, 0);
    assert.match(server.logs(), /"msg":"stopped cleanly"/);
  },
);

/** A POST /plants on a connection of its own: headers and the body's first byte now, the rest on demand. */
async function slowPost(port: number, token: string, requestId: string, body: string) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let response = '';
  socket.on('data', (chunk: Buffer) => void (response += chunk.toString()));
  const closed = once(socket, 'close');
  socket.write(
    `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${body.length}\r\nX-Request-Id: ${requestId}\r\n\r\n${body[0]!}`,
  );
  return {
    socket,
    /** Sends the rest of the body one byte at a time, a few milliseconds apart. */
    drip: async (): Promise<void> => {
      for (const byte of body.slice(1)) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        socket.write(byte);
      }
    },
    /** Everything the server sent, once it has closed the connection. */
    response: async (): Promise<string> => {
      await closed;
      return response;
    },
  };
}

/** A keep-alive connection that has had one answer and now sits idle; `closed` settles when the server closes it. */
async function idleConnection(port: number, token: string) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const closed = once(socket, 'close');
  let response = '';
  const answered = new Promise<void>((resolve) =>
    socket.on('data', (chunk: Buffer) => {
      response += chunk.toString();
      if (response.endsWith('\r\n\r\n[]')) resolve();
    }),
  );
  socket.write(`GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  await answered;
  return { socket, closed };
}

/** A request on a fresh connection: what came back, or the error code of a connection refused or reset. */
function freshRequest(port: number, token: string): Promise<{ response: string; error?: string }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let response = '';
    let error: string | undefined;
    socket.on('connect', () =>
      socket.write(`GET /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`),
    );
    socket.on('data', (chunk: Buffer) => {
      response += chunk.toString();
      if (/\r\n\r\n\{[^]*\}$/.test(response)) socket.end(); // a whole Error body: enough to judge
    });
    socket.on('error', (e: NodeJS.ErrnoException) => void (error = e.code));
    socket.on('close', () => resolve(error === undefined ? { response } : { response, error }));
  });
}

test(
  'SIGTERM during several slow requests: each finishes with 200 and is stored, a new connection is refused, an idle one and a silent one are closed once a keep-alive timeout has run out, exit 0 within the grace period',
  { timeout: 60_000 },
  async (t) => {
    // Its keep-alive timeout is half of it (3 s): how long the idle connections below stay.
    const graceMs = 6000;
    const env = { DATABASE_URL: `sqlite:${join(dir, 'many.db')}`, SHUTDOWN_GRACE: `${graceMs / 1000}s` };
    const token = await mintCliToken(env);
    const server = await startServer({ ...env, LOG_LEVEL: 'debug' });
    t.after(() => server.stop());
    const port = Number(new URL(server.url).port);

    const idle = await idleConnection(port, token);
    t.after(() => idle.socket.destroy());
    // A connection that never sends a byte: Node would wait for its headers until HEADERS_TIMEOUT.
    const silent = connect(port, '127.0.0.1');
    t.after(() => silent.destroy());
    await once(silent, 'connect');
    let silentReceived = '';
    silent.on('data', (chunk: Buffer) => void (silentReceived += chunk.toString()));
    const silentClosed = once(silent, 'close');
    const names = ['slow fern', 'slow moss', 'slow ivy'];
    const slow = await Promise.all(
      names.map((name, i) => slowPost(port, token, `drain-${i + 1}`, JSON.stringify({ id: i + 1, name }))),
    );
    t.after(() => slow.forEach(({ socket }) => socket.destroy()));
    await logged(server, 'the three slow requests', (logs) =>
      names.every((_, i) => logs.includes(`"reqId":"drain-${i + 1}"`)),
    );

    server.child.kill('SIGTERM');
    const exited = exitWithin(server, graceMs + 5000);
    // The listener is closed once the server logs it is shutting down. The idle connection is not
    // closed then: its client may be sending its next request on it.
    await logged(server, 'shutting down', (logs) => logs.includes('shutting down'));

    // While the three still drain, a newcomer is refused: it never reached the server, so a load
    // balancer can safely try another.
    const fresh = await freshRequest(port, token);
    assert.deepEqual(fresh, { response: '', error: 'ECONNREFUSED' });

    await Promise.all(slow.map(({ drip }) => drip()));
    const responses = await Promise.all(slow.map(({ response }) => response()));
    responses.forEach((response, i) => {
      assert.match(response, /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(response, /\r\nconnection: close\r\n/i);
      assert.ok(response.endsWith(JSON.stringify({ name: names[i] })), response);
    });
    // The idle connection sent nothing more: the server closed it once the keep-alive timeout it
    // advertised (half the grace period) had run out, and the silent one a keep-alive timeout after
    // the drain began, without an answer to anything; so the drain could end with exit 0.
    await idle.closed;
    await silentClosed;
    assert.equal(silentReceived, '');
    assert.equal(await exited, 0);
    assert.match(server.logs(), /"msg":"stopped cleanly"/);

    // Stored: a new process on the same database lists all three.
    const again = await startServer(env);
    t.after(() => again.stop());
    // Connection: close, or its idle keep-alive connection would hold the stop below for a keep-alive timeout.
    const listed = await fetch(`${again.url}/plants`, {
      headers: { authorization: `Bearer ${token}`, connection: 'close' },
    });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      await listed.json(),
      names.map((name) => ({ name })),
    );
    assert.equal(await again.stop(), 0);
  },
);

test(
  'SIGTERM during a request that outlives the grace period: the process exits 1 by the deadline, and the request gets no answer',
  { timeout: 60_000 },
  async (t) => {
    const graceMs = 1000;
    const env = { DATABASE_URL: `sqlite:${join(dir, 'grace.db')}`, SHUTDOWN_GRACE: `${graceMs}ms` };
    const token = await mintCliToken(env, 'alice', 'plants:write');
    const server = await startServer({ ...env, LOG_LEVEL: 'debug' });
    t.after(() => server.stop());

    // The body is never finished: the request could only end by the grace period running out.
    const stuck = await slowPost(Number(new URL(server.url).port), token, 'stuck-1', '{"id":7,"name":"stuck"}');
    t.after(() => stuck.socket.destroy());
    await logged(server, 'the request stuck-1', (logs) => logs.includes('"reqId":"stuck-1"'));

    server.child.kill('SIGTERM');
    assert.equal(await exitWithin(server, graceMs + 5000), 1);
    assert.match(server.logs(), /"msg":"shutdown grace period over; exiting"/);
    assert.doesNotMatch(server.logs(), /"msg":"stopped cleanly"/);
    assert.equal(await stuck.response(), '');
  },
);
