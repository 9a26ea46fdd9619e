import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { exitWithin, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

// SIGTERM under keep-alive load. Every request that reaches the server after
// the signal gets a whole response; a client learns of the shutdown from `Connection: close` or a
// refused connection (which a load balancer safely retries), never from a reset.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-shutdown-load-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const engines: Array<[string, () => Promise<{ url: string; drop: () => Promise<void> }>]> = [
  [
    'SQLite',
    () => Promise.resolve({ url: `sqlite:${join(mkdtempSync(join(dir, 'db-')), 'store.db')}`, drop: async () => {} }),
  ],
  ['PostgreSQL', scratchSchema],
];

const CLIENTS = 64;
/** At most this many creates per client, so a server that never stops cannot make the test run forever. */
const MAX_PER_CLIENT = 1000;

type Outcome = { status: number; body: string; close: boolean } | { error: string };

/** One POST /plants: the whole response, or the error code of a connection refused, reset or cut. */
function create(agent: Agent, port: number, token: string, id: number): Promise<Outcome> {
  const body = JSON.stringify({ id, name: `load ${id}` });
  return new Promise((resolve) => {
    const req = request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/plants',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => void (text += chunk));
        res.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
        res.on('close', () =>
          resolve(
            res.complete
              ? { status: res.statusCode ?? 0, body: text, close: res.headers.connection === 'close' }
              : { error: 'response cut off' },
          ),
        );
      },
    );
    // Node reports a connection the server closed before answering as ECONNRESET ("socket hang up").
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ error: error.code ?? error.message }));
    req.end(body);
  });
}

interface Tally {
  /** Creates answered 200, by id. */
  readonly created: Set<number>;
  /** The clients that have had a create answered 200 (each on its keep-alive connection). */
  readonly served: Set<number>;
  /** Every other answer or error, by status or error code, with a count. */
  readonly other: Map<string, number>;
  sent: number;
  /** Answers with `Connection: close`: the server sent the client away. */
  closing: number;
  refused: number;
}

/**
 * CLIENTS clients, each with one keep-alive connection of its own, creating plants one after the
 * other until the server refuses a connection: then it has stopped listening, and the client is done.
 */
async function createUntilRefused(port: number, token: string, tally: Tally): Promise<void> {
  await Promise.all(
    Array.from({ length: CLIENTS }, async (_, client) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      try {
        for (let n = 0; n < MAX_PER_CLIENT; n++) {
          const id = client * MAX_PER_CLIENT + n + 1;
          tally.sent += 1;
          const outcome = await create(agent, port, token, id);
          if ('error' in outcome && outcome.error === 'ECONNREFUSED') {
            tally.refused += 1;
            return;
          }
          if ('status' in outcome && outcome.status === 200) {
            assert.equal(outcome.body, JSON.stringify({ name: `load ${id}` }));
            tally.created.add(id);
            tally.served.add(client);
            if (outcome.close) tally.closing += 1;
          } else {
            const key = 'status' in outcome ? String(outcome.status) : outcome.error;
            tally.other.set(key, (tally.other.get(key) ?? 0) + 1);
          }
        }
      } finally {
        agent.destroy();
      }
    }),
  );
}

/** A GET on a connection of its own, closed after the answer (a kept-alive one would hold the server's stop). */
function get(url: URL, token: string): Promise<{ status: number; link: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => void (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, link: String(res.headers.link ?? ''), body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Every plant the token's owner has, following the Link header page by page. */
async function listedIds(url: string, token: string): Promise<Set<number>> {
  const ids = new Set<number>();
  for (let path: string | undefined = '/plants?limit=1000'; path !== undefined;) {
    const response = await get(new URL(path, url), token);
    assert.equal(response.status, 200, response.body);
    for (const plant of JSON.parse(response.body) as Array<{ name: string }>) {
      ids.add(Number(/^load (\d+)$/.exec(plant.name)![1]));
    }
    path = /<([^>]+)>;\s*rel="next"/.exec(response.link)?.[1];
  }
  return ids;
}

const GRACE_MS = 10_000;

for (const [engine, database] of engines) {
  for (const workers of [1, 2]) {
    const args = workers > 1 ? ['--workers', String(workers)] : [];
    const name = workers > 1 ? `${engine}, --workers ${workers}` : engine;
    test(
      `SIGTERM under ${CLIENTS} keep-alive clients creating plants on ${name}: no request reset or unanswered, every 200 stored, exit 0`,
      { timeout: 60_000 },
      async (t) => {
        const db = await database();
        t.after(() => db.drop());
        // No rate limit nor overload refusal: every request should be a create that commits.
        const env = {
          DATABASE_URL: db.url,
          RATE_LIMIT: 'off',
          MAX_EVENT_LOOP_DELAY: 'off',
          SHUTDOWN_GRACE: `${GRACE_MS / 1000}s`,
        };
        const token = await mintCliToken(env, 'loader');
        const server = await startServer(env, undefined, args);
        t.after(() => server.stop());
        const port = Number(new URL(server.url).port);

        const tally: Tally = {
          created: new Set(),
          served: new Set(),
          other: new Map(),
          sent: 0,
          closing: 0,
          refused: 0,
        };
        const load = createUntilRefused(port, token, tally);
        // The signal comes once every client has had a create answered: each has its connection, in use.
        await eventually(
          async () => (tally.served.size === CLIENTS ? true : undefined),
          () =>
            `every client answered before the signal (${tally.served.size} of ${CLIENTS}; ${tally.created.size} created; others: ${JSON.stringify(Object.fromEntries(tally.other))})`,
          30_000,
        );
        const beforeSignal = tally.created.size;
        const exited = exitWithin(server, GRACE_MS + 5000);
        server.child.kill('SIGTERM');
        await load;
        const code = await exited;

        t.diagnostic(
          `${name}: ${tally.sent} requests, ${tally.created.size} created (${beforeSignal} before SIGTERM), ` +
            `${tally.closing} answered with Connection: close, ${tally.refused} connections refused, ` +
            `others: ${JSON.stringify(Object.fromEntries(tally.other))}`,
        );
        assert.deepEqual(Object.fromEntries(tally.other), {}, 'every request reached is answered 200, none reset');
        // Each client was sent away by a Connection: close, then found the listener closed.
        assert.equal(tally.refused, CLIENTS);
        assert.ok(tally.closing >= CLIENTS, `${tally.closing} answers closed their connection`);
        assert.equal(tally.sent, tally.created.size + tally.refused);
        assert.equal(code, 0, server.logs().slice(-2000));
        assert.equal(server.logs().match(/"msg":"stopped cleanly"/g)?.length, workers);

        // Every answered create is stored, and nothing else is: reopen the database and list it.
        const again = await startServer(env);
        t.after(() => again.stop());
        const stored = await listedIds(again.url, token);
        assert.equal(stored.size, tally.created.size);
        for (const id of tally.created) assert.ok(stored.has(id), `plant ${id} was answered 200 but is not stored`);
        assert.equal(await again.stop(), 0);
      },
    );
  }
}

for (const workers of [1, 2]) {
  const args = workers > 1 ? ['--workers', String(workers)] : [];
  test(
    `an idle keep-alive connection whose next request arrives just after SIGTERM gets a whole response${workers > 1 ? ` (--workers ${workers})` : ''}`,
    { timeout: 30_000 },
    async (t) => {
      // The shipped SHUTDOWN_GRACE: the connection sits idle between its two requests, and must still
      // be open for the second one (the Keep-Alive timeout is half the grace period).
      const env = {
        DATABASE_URL: `sqlite:${join(mkdtempSync(join(dir, 'idle-')), 'store.db')}`,
        SHUTDOWN_GRACE: '10s',
      };
      const token = await mintCliToken(env, 'alice', 'plants:write');
      const server = await startServer(env, undefined, args);
      t.after(() => server.stop());

      const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
      t.after(() => socket.destroy());
      await once(socket, 'connect');
      let received = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => void (received += chunk));
      socket.on('error', () => {}); // a reset shows as the missing response below
      const closed = once(socket, 'close');
      const post = (id: number): void => {
        const body = JSON.stringify({ id, name: `idle ${id}` });
        socket.write(
          `POST /plants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${body.length}\r\n\r\n${body}`,
        );
      };
      post(1);
      while (!received.endsWith('{"name":"idle 1"}')) await once(socket, 'data');
      assert.match(received, /\r\nkeep-alive: timeout=\d+\r\n/i);

      // The connection is idle; SIGTERM comes, and the client's next request once every worker has
      // said it is shutting down (its listener closed, its answers closing connections).
      received = '';
      const exited = exitWithin(server, 15_000);
      server.child.kill('SIGTERM');
      await eventually(
        async () => ((server.logs().match(/"msg":"shutting down/g)?.length ?? 0) >= workers ? true : undefined),
        () => `${workers} workers shutting down: ${server.logs().slice(-2000)}`,
      );
      post(2);
      await closed;

      assert.match(received, /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(received, /\r\nconnection: close\r\n/i);
      assert.ok(received.endsWith('{"name":"idle 2"}'), received);
      assert.equal(await exited, 0);
    },
  );
}
