import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { type ClientRequest, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type ServerProcess, mintCliToken, startServer } from '../process.js';
import { eventually } from '../support/eventually.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

// A change-feed reader that resumes with Last-Event-ID, across the kill of the
// instance it read from and while two instances write, sees every event exactly once.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-feed-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Message {
  readonly id: string;
  readonly event: string;
  readonly data: string;
}

/** A reader of GET /events that resumes with Last-Event-ID whenever its stream ends or fails. */
class Reader {
  readonly messages: Message[] = [];
  private request: ClientRequest | undefined;
  private stopped = false;
  lastId: string | undefined;

  constructor(
    private readonly token: string,
    private server: () => ServerProcess,
  ) {}

  connect(): void {
    if (this.stopped) return;
    const { port } = new URL(this.server().url);
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (this.lastId !== undefined) headers['last-event-id'] = this.lastId;
    else headers['last-event-id'] = '0';
    const req = request({ host: '127.0.0.1', port, path: '/events', headers });
    this.request = req;
    let buffer = '';
    const again = (): void => {
      if (this.request !== req) return;
      this.request = undefined;
      setTimeout(() => this.connect(), 100);
    };
    req.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const fields = new Map(
            block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
          );
          if (!fields.has('id')) continue; // a comment: connected, keep-alive
          const message = { id: fields.get('id')!, event: fields.get('event')!, data: fields.get('data')! };
          this.messages.push(message);
          this.lastId = message.id;
        }
      });
      res.on('end', again);
      res.on('error', again);
      res.on('close', again);
    });
    req.on('error', again);
    req.end();
  }

  stop(): void {
    this.stopped = true;
    this.request?.destroy();
  }
}

async function post(server: ServerProcess, token: string, id: number): Promise<number> {
  try {
    const r = await fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', connection: 'close' },
      body: `{"id":${id},"name":"p${id}"}`,
    });
    return r.status;
  } catch {
    return 0; // the instance was killed under it
  }
}

async function until(what: string, check: () => boolean): Promise<void> {
  await eventually(async () => (check() ? true : undefined), what, 30_000);
}

for (const engine of ['sqlite', 'postgres']) {
  test(
    `${engine}: a reader resuming with Last-Event-ID across a kill and two writing instances sees every event once`,
    { timeout: 120_000 },
    async (t) => {
      let url: string;
      if (engine === 'sqlite') url = `sqlite:${join(dir, 'feed.db')}`;
      else {
        const scratch = await scratchSchema();
        t.after(() => scratch.drop());
        url = scratch.url;
      }
      const env = { DATABASE_URL: url, RATE_LIMIT: 'off' };
      const token = await mintCliToken(env);
      const a = await startServer(env);
      const b = await startServer(env);
      t.after(() => Promise.all([a.stop(), b.stop()]));
      let current = a;
      const reader = new Reader(token, () => current);
      t.after(() => reader.stop());
      reader.connect();

      // Both instances write; the reader reads from A, which is killed half way.
      let id = 0;
      let created = 0; // writes are sequential, so none is in flight at the kill: each 200 is one event
      const write = async (count: number): Promise<void> => {
        for (let i = 0; i < count; i++) {
          id += 1;
          const target = id % 2 === 0 && a.child.exitCode === null && a.child.signalCode === null ? a : b;
          if ((await post(target, token, id)) === 200) created += 1;
        }
      };
      await write(60);
      await until('30 events read', () => reader.messages.length >= 30);
      current = b; // where the reader goes once A is gone
      const killed = once(a.child, 'exit');
      a.child.kill('SIGKILL');
      await killed;
      await write(60);

      // Every event in the log, read by a fresh reader from the start once the writers are done.
      const check = new Reader(token, () => b);
      t.after(() => check.stop());
      check.connect();
      await until(
        `the ${created} events read by both readers`,
        () => check.messages.length >= created && reader.messages.length >= created,
      );
      assert.equal(created, 120);
      assert.equal(check.messages.length, created);
      const ids = reader.messages.map((m) => m.id);
      assert.equal(new Set(ids).size, ids.length, 'no event twice');
      assert.deepEqual(
        ids,
        check.messages.map((m) => m.id),
        'every event, in order',
      );
      assert.deepEqual(
        reader.messages.map((m) => m.data),
        check.messages.map((m) => m.data),
      );
    },
  );
}
