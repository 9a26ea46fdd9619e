import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runCli, startServer } from '../process.js';

const dir = mkdtempSync(join(tmpdir(), 'plant-store-shutdown-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Resolves when `predicate` holds for the server's logs; checked on every chunk the server writes. */
function logged(server: Awaited<ReturnType<typeof startServer>>, predicate: (logs: string) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (predicate(server.logs())) {
        server.child.stdout?.off('data', check);
        resolve();
      }
    };
    server.child.stdout?.on('data', check);
    check();
  });
}

test('SIGTERM lets an in-flight request finish with 200, closes its connection, and exits 0', async (t) => {
  const env = { DATABASE_URL: `sqlite:${join(dir, 'store.db')}` };
  const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', 'plants:write', '--json'], env);
  const { token } = JSON.parse(minted.stdout) as { token: string };
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
  await logged(server, (logs) => logs.includes('"reqId":"in-flight-1"'));
  const exited = once(server.child, 'exit');
  server.child.kill('SIGTERM');
  await logged(server, (logs) => logs.includes('shutting down'));
  socket.write(body.slice(10));

  await once(socket, 'close');
  assert.match(response, /^HTTP\/1\.1 200 OK\r\n/);
  assert.match(response, /\r\nconnection: close\r\n/i);
  assert.ok(response.endsWith('{"name":"slow fern"}'));
  const [code] = (await exited) as [number | null];
  assert.equal(code, 0);
  assert.match(server.logs(), /"msg":"stopped cleanly"/);
});
