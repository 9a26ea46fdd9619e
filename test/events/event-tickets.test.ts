import assert from 'node:assert/strict';
import { type TestContext, describe, test } from 'node:test';
import { hashToken } from '../../src/auth/token.js';
import { READ_WRITE, TEST_ENGINE, type TestApp, makeApp } from '../helpers.js';
import { assertErrorBody, assertErrorJson, listen } from '../http/support.js';
import { create, plantBody } from '../plants/plant.helpers.js';
import { RawStream, eventually } from './stream-support.js';

// Interface 1.3.0, "The change feed from a browser": POST /events/tickets gives a single-use
// ticket of 60 s, bound to its token; GET /events?ticket= opens a stream as that token would and
// spends it. Never logged, dead with its token, and the stream follows every rule of a stream.
// Run on SQLite here and on PostgreSQL through test/postgres/events.test.ts.

interface Served {
  readonly h: TestApp;
  readonly port: number;
  readonly lines: string[];
  open(path: string, token?: string, headers?: Record<string, string>): RawStream;
}

async function served(t: TestContext): Promise<Served> {
  const lines: string[] = [];
  const h = await makeApp({ logLevel: 'info' }, undefined, {
    write: (text) => lines.push(...text.split('\n').filter(Boolean)),
  });
  const streams: RawStream[] = [];
  t.after(async () => {
    for (const stream of streams) stream.destroy();
    await h.close();
  });
  const port = await listen(h);
  return {
    h,
    port,
    lines,
    open: (path, token, headers) => {
      const stream = new RawStream(port, token, headers, path);
      streams.push(stream);
      return stream;
    },
  };
}

async function ticketFor(h: TestApp, token: string): Promise<string> {
  const res = await h.call(token, { method: 'POST', url: '/events/tickets' });
  assert.equal(res.statusCode, 201, res.payload);
  return res.json<{ ticket: string }>().ticket;
}

async function opened(stream: RawStream): Promise<void> {
  await eventually('the stream is answered', () => stream.status !== undefined);
  assert.equal(stream.status, 200, `the stream opens (answered ${stream.status}: ${stream.text})`);
  assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
  await eventually('the stream is set up', () => stream.text.includes(': connected'));
}

/** The Error body of a refused stream request, after its status and type are checked. */
async function refused(stream: RawStream, status: number): Promise<{ message: string }> {
  await eventually('the request is answered', () => stream.status !== undefined && stream.ended);
  assert.equal(stream.status, status, stream.text);
  assert.match(String(stream.headers['content-type']), /^application\/json/);
  assertErrorJson(stream.text, status);
  return JSON.parse(stream.text) as { message: string };
}

function assertTicketRefused(body: { message: string }): void {
  assert.match(body.message, /ticket is unknown, spent, expired, or its token is revoked or expired/);
}

describe('POST /events/tickets', () => {
  test('answers 201 with a ticket and when it expires, 60 s from now on the service’s clock, never cached', async (t) => {
    const { h } = await served(t);
    const reader = await h.token('alice', ['plants:read']);
    const before = Date.now();
    const res = await h.call(reader, { method: 'POST', url: '/events/tickets' });
    assert.equal(res.statusCode, 201, res.payload);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.equal(res.headers['cache-control'], 'no-store');
    const body = res.json<{ ticket: string; expiresAt: string }>();
    assert.deepEqual(Object.keys(body).sort(), ['expiresAt', 'ticket']);
    assert.match(body.ticket, /^pse_[A-Za-z0-9_-]{43}$/);
    assert.match(body.expiresAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    if (TEST_ENGINE === 'sqlite') {
      assert.equal(body.expiresAt, new Date(Date.UTC(2026, 0, 1) + 60_000).toISOString());
    } else {
      // PostgreSQL keeps the time on its own clock (any instance may spend the ticket): now + 60 s.
      const expires = Date.parse(body.expiresAt);
      assert.ok(expires >= before + 59_000 && expires <= Date.now() + 61_000, body.expiresAt);
    }
    const second = await ticketFor(h, reader);
    assert.notEqual(second, body.ticket, 'each ticket is new');
  });

  test('needs plants:read (403), and a token (401); the store keeps no ticket it refused', async (t) => {
    const { h } = await served(t);
    const writer = await h.token('alice', ['plants:write', 'webhooks:read']);
    const forbidden = await h.call(writer, { method: 'POST', url: '/events/tickets' });
    assertErrorBody(forbidden, 403);
    assert.match(String(forbidden.headers['www-authenticate']), /insufficient_scope.*plants:read/);
    const anonymous = await h.call(undefined, { method: 'POST', url: '/events/tickets' });
    assertErrorBody(anonymous, 401);
    const admin = await h.token('root', ['plants:admin']);
    assert.equal((await h.call(admin, { method: 'POST', url: '/events/tickets' })).statusCode, 201);
  });
});

/** The ids of every event stored, oldest first (each engine numbers them its own way). */
const eventIds = async (h: TestApp): Promise<bigint[]> => (await h.store.readEvents(0n, null, 100)).map((e) => e.id);

describe('GET /events?ticket=', () => {
  test('opens a stream as the ticket’s token would, without Authorization: its own plants’ events, not another’s', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const bob = await s.h.token('bob', READ_WRITE);
    const stream = s.open(`/events?ticket=${await ticketFor(s.h, alice)}`);
    await opened(stream);
    await create(s.h, bob, plantBody('7', 'bob fern'));
    await create(s.h, alice, plantBody('8', 'alice fern'));
    await eventually('alice’s event arrives', () => stream.text.includes('alice fern'));
    const [, alices] = await eventIds(s.h);
    assert.ok(
      stream.text.includes(`\nid: ${alices}\nevent: plant.created\ndata: {"id":8,"name":"alice fern"}\n\n`),
      stream.text,
    );
    assert.doesNotMatch(stream.text, /bob fern/);
  });

  test('is spent by the stream it opened: the same ticket again answers 401, on a stream or not', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const ticket = await ticketFor(s.h, alice);
    await opened(s.open(`/events?ticket=${ticket}`));
    const again = s.open(`/events?ticket=${ticket}`);
    const body = await refused(again, 401);
    assertTicketRefused(body);
    assert.equal(again.headers['www-authenticate'], 'Bearer realm="plant-store", error="invalid_token"');
  });

  test('answers 401 to a ticket never issued, a malformed one, and one given twice in the query', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const real = await ticketFor(s.h, alice);
    const forged = `pse_${'A'.repeat(43)}`;
    for (const path of [
      `/events?ticket=${forged}`,
      '/events?ticket=',
      '/events?ticket=pse_short',
      `/events?ticket=${real}&ticket=${real}`,
      `/events?ticket=${alice}`, // the token itself is no ticket
    ]) {
      const stream = s.open(path);
      assertTicketRefused(await refused(stream, 401));
    }
    // None of those spent the real ticket.
    await opened(s.open(`/events?ticket=${real}`));
  });

  test('a ticket with Authorization as well answers 400, and pages of JSON refuse a ticket (400) without spending it', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const ticket = await ticketFor(s.h, alice);
    const both = s.open(`/events?ticket=${ticket}`, alice);
    assert.match((await refused(both, 400)).message, /a bearer token or a ticket, not both/);
    const pages = await s.h.call(undefined, {
      method: 'GET',
      url: `/events?ticket=${ticket}`,
      headers: { accept: 'application/json' },
    });
    assertErrorBody(pages, 400);
    assert.match(pages.json<{ message: string }>().message, /a ticket opens a stream/);
    await opened(s.open(`/events?ticket=${ticket}`));
  });

  test('dies with its token: a ticket of a revoked token answers 401, and the stream it opened ends at the revocation', async (t) => {
    const s = await served(t);
    const issued = await s.h.tokens.create({ subject: 'alice', scopes: READ_WRITE });
    const unused = await ticketFor(s.h, issued.token);
    const stream = s.open(`/events?ticket=${await ticketFor(s.h, issued.token)}`);
    await opened(stream);
    assert.equal(await s.h.tokens.revoke(issued.id), true);
    s.h.advance(10_000); // past the token cache: the revocation is seen on the next check
    await eventually('the stream ends', () => stream.ended);
    assert.match(stream.text, /the token was revoked or has expired/);
    assertTicketRefused(await refused(s.open(`/events?ticket=${unused}`), 401));
  });

  test('dies with its token’s expiry as well', async (t) => {
    const s = await served(t);
    const token = await s.h.token('alice', READ_WRITE, 30_000);
    const ticket = await ticketFor(s.h, token);
    s.h.advance(60_000 + 30_000);
    const stream = s.open(`/events?ticket=${ticket}`);
    await refused(stream, 401);
  });

  test('counts toward the 5 streams of its token: a sixth, by ticket, answers 429', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    for (let i = 0; i < 5; i++) await opened(s.open('/events', alice));
    const sixth = s.open(`/events?ticket=${await ticketFor(s.h, alice)}`);
    assert.match((await refused(sixth, 429)).message, /at most 5 open event streams per token/);
  });

  test('resumes through a fresh ticket with ?after= (or Last-Event-ID): nothing missed, nothing twice', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const first = s.open(`/events?ticket=${await ticketFor(s.h, alice)}`);
    await opened(first);
    await create(s.h, alice, plantBody('1', 'one'));
    const [one] = await eventIds(s.h);
    await eventually('event 1', () => first.text.includes(`id: ${one}\n`));
    first.destroy();
    await create(s.h, alice, plantBody('2', 'two'));
    await create(s.h, alice, plantBody('3', 'three'));
    const [, two, three] = await eventIds(s.h);
    const byQuery = s.open(`/events?ticket=${await ticketFor(s.h, alice)}&after=${one}`);
    const byHeader = s.open(`/events?ticket=${await ticketFor(s.h, alice)}`, undefined, {
      'last-event-id': String(one),
    });
    for (const stream of [byQuery, byHeader]) {
      await opened(stream);
      await eventually('events 2 and 3', () => stream.text.includes(`id: ${three}\n`));
      assert.deepEqual(
        [...stream.text.matchAll(/^id: (\d+)$/gm)].map((m) => m[1]),
        [String(two), String(three)],
      );
    }
  });

  test('is never logged: the request line shows ticket=[redacted], and no line holds the ticket', async (t) => {
    const s = await served(t);
    const alice = await s.h.token('alice', READ_WRITE);
    const res = await s.h.call(alice, { method: 'POST', url: '/events/tickets' });
    const { ticket } = res.json<{ ticket: string }>();
    await opened(s.open(`/events?ticket=${ticket}&types=plant.created`));
    const refusedStream = s.open(`/events?ticket=${ticket}`);
    await refused(refusedStream, 401);
    await eventually('the refusal is logged', () =>
      s.lines.some((line) => line.includes('"status":401') && line.includes('/events?ticket=')),
    );
    const all = s.lines.join('\n');
    assert.ok(!all.includes(ticket), 'the ticket is in no line');
    assert.ok(!all.includes(ticket.slice(4)), 'no part of it either');
    assert.match(all, /"url":"\/events\?ticket=\[redacted\]"/);
    assert.match(all, /"refused":"ticket"/);
  });
});

describe('the tickets in the store', () => {
  test('a ticket is spent once, by its hash; an expired one is not spent, and the next ticket made forgets it', async (t) => {
    const { h } = await served(t);
    const ticket = {
      hash: hashToken('pse_one'),
      tokenId: 'abcdefgh',
      subject: 'alice',
      scopes: ['plants:read'],
      credentialExpiresAt: null,
    };
    const now = Date.now();
    const expiresAt = await h.store.createTicket(ticket, now, 60_000);
    const spent = await h.store.spendTicket(ticket.hash, now);
    assert.deepEqual(spent, { ...ticket, expiresAt });
    assert.equal(await h.store.spendTicket(ticket.hash, now), undefined, 'spent once');
    // Lifetime 0: expired the moment it is made, on either engine's clock.
    const stale = { ...ticket, hash: hashToken('pse_two'), credentialExpiresAt: now + 5000 };
    await h.store.createTicket(stale, now, 0);
    assert.equal(await h.store.spendTicket(stale.hash, now), undefined, 'an expired ticket opens nothing');
  });
});
