import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { test } from 'node:test';
import { READ_WRITE, makeApp } from '../helpers.js';
import { assertErrorJson, listen } from './support.js';

// A client still sending its body when the service answers early (413, 401, 415) reads
// that answer. The service reads and discards what follows for a while (src/http/lingering-close.ts)
// instead of closing at once, whose reset made the client's next write fail with EPIPE before it
// had read the answer.

const MiB = 1024 * 1024;
const ROUNDS = 20;

/**
 * The client, in a process of its own as a real client is (in the server's process the two share
 * one event loop, which hides the race): `rounds` POSTs of `size` bytes with node's http.request,
 * each on a fresh connection, the body streamed in 64 KiB writes without waiting for the answer,
 * chunked or with Content-Length. One JSON line per round: the answer read, or the error instead.
 */
const CLIENT = `
const { request } = require('node:http');
const [port, rounds, size, framing, token, type] = JSON.parse(process.argv[1]);
const chunk = Buffer.alloc(64 * 1024, 'x');
const post = () => new Promise((resolve) => {
  const headers = { 'content-type': type };
  if (token) headers.authorization = 'Bearer ' + token;
  if (framing === 'length') headers['content-length'] = String(size);
  const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/plants', headers, agent: false });
  let answered = false;
  req.on('error', (error) => answered || resolve({ error: error.code || error.message }));
  req.on('response', (res) => {
    answered = true;
    const body = [];
    res.on('data', (data) => body.push(data));
    res.on('error', (error) => resolve({ error: 'reading the answer: ' + (error.code || error.message) }));
    res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(body).toString() }));
  });
  let sent = 0;
  const pump = () => {
    while (sent < size) {
      const part = chunk.subarray(0, Math.min(chunk.length, size - sent));
      sent += part.length;
      if (!req.write(part)) return void req.once('drain', pump);
    }
    req.end();
  };
  pump();
});
(async () => {
  for (let i = 0; i < rounds; i++) console.log(JSON.stringify(await post()));
})();
`;

interface Outcome {
  readonly status?: number;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly error?: string;
}

interface Post {
  readonly size: number;
  readonly framing: 'chunked' | 'length';
  readonly token?: string;
  readonly type?: string;
}

/** Runs the client for `ROUNDS` rounds of `post`: what each round read. */
function client(port: number, post: Post): Promise<Outcome[]> {
  const args = [port, ROUNDS, post.size, post.framing, post.token ?? '', post.type ?? 'application/json'];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', CLIENT, JSON.stringify(args)], { timeout: 120_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`the client failed: ${error.message} ${stderr}`, { cause: error }));
      resolve(
        stdout
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as Outcome),
      );
    });
  });
}

test(
  `a client still sending its body reads the early answer, ${ROUNDS} times of ${ROUNDS}`,
  { timeout: 600_000 },
  async (t) => {
    const h = await makeApp();
    t.after(() => h.close());
    const token = await h.token('alice', READ_WRITE);
    const port = await listen(h);
    const cases: Array<[string, number, Post]> = [
      ['a 2 MiB chunked body → 413', 413, { size: 2 * MiB, framing: 'chunked', token }],
      ['a 2 MiB body with Content-Length → 413', 413, { size: 2 * MiB, framing: 'length', token }],
      ['a 20 MiB chunked body → 413', 413, { size: 20 * MiB, framing: 'chunked', token }],
      ['a 20 MiB body with Content-Length → 413', 413, { size: 20 * MiB, framing: 'length', token }],
      ['a 2 MiB chunked body without a token → 401', 401, { size: 2 * MiB, framing: 'chunked' }],
      ['a 20 MiB body with Content-Length without a token → 401', 401, { size: 20 * MiB, framing: 'length' }],
      ['a 2 MiB chunked text body → 415', 415, { size: 2 * MiB, framing: 'chunked', token, type: 'text/plain' }],
      [
        'a 20 MiB text body with Content-Length → 415',
        415,
        { size: 20 * MiB, framing: 'length', token, type: 'text/plain' },
      ],
    ];
    for (const [name, status, post] of cases) {
      await t.test(name, async () => {
        const outcomes = await client(port, post);
        assert.equal(outcomes.length, ROUNDS);
        const read = outcomes.filter((outcome) => outcome.status === status).length;
        assert.equal(
          read,
          ROUNDS,
          `${read} of ${ROUNDS} read the ${status}: ${JSON.stringify(outcomes.find((o) => o.status !== status))}`,
        );
        for (const outcome of outcomes) {
          assert.match(String(outcome.headers?.['content-type']), /^application\/json\b/i);
          assert.equal(outcome.headers?.connection, 'close');
          assertErrorJson(outcome.body ?? '', status);
        }
      });
    }
    const listed = await h.call(token, { method: 'GET', url: '/plants' });
    assert.deepEqual(listed.json(), [], 'nothing was stored');
  },
);

/** `promise`, or a failure saying `what` did not happen within `ms`: a deadline on a condition, not a speed. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/**
 * Opens a connection, sends `head` and then body bytes without end (`pace`: ms between 16 KiB
 * writes, or 0 to write as fast as the connection takes them), reading what comes back. Settles
 * once the server has closed the connection, with what it answered.
 */
function sendForever(port: number, head: string, pace: number): Promise<string> {
  return new Promise((resolve) => {
    // Half-open: the server's FIN does not end this side, which goes on writing until it is cut off.
    const socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
    const received: Buffer[] = [];
    const chunk = Buffer.alloc(16 * 1024, 'x');
    let timer: NodeJS.Timeout | undefined;
    const pump = (): void => {
      if (socket.destroyed) return;
      if (pace > 0) {
        socket.write(chunk);
        timer = setTimeout(pump, pace);
      } else {
        while (socket.write(chunk));
        socket.once('drain', pump);
      }
    };
    socket.on('data', (data: Buffer) => void received.push(data));
    socket.on('connect', () => {
      socket.write(head);
      pump();
    });
    socket.on('error', () => {}); // the reset that cuts it off
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(received).toString());
    });
  });
}

test('a client that goes on sending past the bound is cut off, fast or slow', { timeout: 120_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const port = await listen(h);
  // One chunk announced as 1 TiB: everything sent after its size line is that chunk's data.
  const endless =
    `POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10000000000\r\n';
  for (const [name, pace] of [
    ['as fast as it can (the size bound)', 0],
    ['16 KiB every 50 ms (the time bound)', 50],
  ] as const) {
    await t.test(name, async () => {
      const text = await within(sendForever(port, endless, pace), 60_000, 'the server closes the connection');
      assert.match(text, /^HTTP\/1\.1 413 /, `the 413 came first, got ${JSON.stringify(text.slice(0, 80))}`);
      assert.equal(text.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, 'one answer');
    });
  }
});

test('a request sent after the body of an early answer is not run', { timeout: 30_000 }, async (t) => {
  const h = await makeApp();
  t.after(() => h.close());
  const token = await h.token('alice', READ_WRITE);
  const port = await listen(h);
  const head = (length: number): string =>
    `POST /plants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  const plant = '{"id":2,"name":"pipelined"}';
  const text = await within(
    new Promise<string>((resolve) => {
      const socket = connect({ port, host: '127.0.0.1' });
      const received: Buffer[] = [];
      socket.on('data', (data: Buffer) => void received.push(data));
      socket.on('error', () => {});
      socket.on('close', () => resolve(Buffer.concat(received).toString()));
      // The whole too-large body, then a second request behind it, then this client's FIN.
      socket.end(`${head(64 * 1024)}${'x'.repeat(64 * 1024)}${head(Buffer.byteLength(plant))}${plant}`);
    }),
    20_000,
    'the server closes the connection',
  );
  assert.equal(text.match(/HTTP\/1\.1 \d{3} /g)?.length, 1, `one answer, got ${JSON.stringify(text)}`);
  assert.match(text, /^HTTP\/1\.1 413 /);
  const listed = await h.call(token, { method: 'GET', url: '/plants' });
  assert.deepEqual(listed.json(), [], 'the second request created nothing');
});
