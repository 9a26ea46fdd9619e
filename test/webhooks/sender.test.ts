import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import type { Resolve } from '../../src/webhooks/address-policy.js';
import { WebhookSender, type WebhookSenderOptions } from '../../src/webhooks/sender.js';

// Every socket these tests open goes to a receiver they started on 127.0.0.1 or ::1: URLs name only
// those, and every injected resolver answers only loopback addresses (see `resolver`). Refusals are
// proven against a live local receiver that must see no connection at all.

interface Seen {
  readonly method: string | undefined;
  readonly url: string | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
  readonly remoteAddress: string | undefined;
}

interface Receiver {
  readonly port: number;
  readonly seen: Seen[];
  /** TCP connections accepted, whether or not a request followed. */
  connections: number;
  close(): Promise<void>;
}

const receivers: Receiver[] = [];
const senders: WebhookSender[] = [];
after(async () => {
  await Promise.all([...senders.map((s) => s.close()), ...receivers.map((r) => r.close())]);
});

async function startReceiver(
  answer: (res: ServerResponse, req: IncomingMessage) => void,
  host = '127.0.0.1',
): Promise<Receiver> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const { method, url, headers } = req;
      seen.push({
        method,
        url,
        headers,
        body: Buffer.concat(chunks).toString(),
        remoteAddress: req.socket.remoteAddress,
      });
      answer(res, req);
    });
  });
  const receiver: Receiver = {
    port: 0,
    seen,
    connections: 0,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
  server.on('connection', () => receiver.connections++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  Object.assign(receiver, { port: (server.address() as AddressInfo).port });
  receivers.push(receiver);
  return receiver;
}

/** A resolver over a fixed map that can only ever answer loopback addresses. */
function resolver(map: Record<string, string>): Resolve & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    const address = map[hostname];
    if (address === undefined)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    assert.ok(address === '127.0.0.1' || address === '::1', 'tests resolve to loopback receivers only');
    return [{ address, family: address === '::1' ? 6 : 4 }];
  };
  return Object.assign(resolve, { calls });
}

function sender(options: Partial<WebhookSenderOptions> = {}): WebhookSender {
  const created = new WebhookSender({ allowPrivate: true, timeoutMs: 300, ...options });
  senders.push(created);
  return created;
}

const delivery = { headers: { 'content-type': 'application/json' }, body: '{"id":9007199254740993,"name":"Fern"}' };

describe('WebhookSender', () => {
  test('POSTs to the address it checked, with the original Host header', async () => {
    const receiver = await startReceiver((res) => res.end('thanks'));
    const resolve = resolver({ 'receiver.test': '127.0.0.1' });
    const url = `http://receiver.test:${receiver.port}/hooks/plants?v=1`;
    const result = await sender({ resolve }).send({ url, ...delivery });
    assert.equal(result.status, 200);
    assert.equal(result.error, undefined);
    assert.equal(result.responseSnippet, 'thanks');
    assert.ok(result.durationMs >= 0);
    assert.deepEqual(resolve.calls, ['receiver.test']);
    const [request] = receiver.seen;
    assert.equal(request?.method, 'POST');
    assert.equal(request?.url, '/hooks/plants?v=1');
    assert.equal(request?.headers.host, `receiver.test:${receiver.port}`);
    assert.equal(request?.headers['content-type'], 'application/json');
    assert.equal(request?.body, delivery.body);
    assert.equal(request?.remoteAddress, '127.0.0.1');
  });

  test('reaches an IPv6 literal receiver', async () => {
    const receiver = await startReceiver((res) => res.writeHead(204).end(), '::1');
    const result = await sender().send({ url: `http://[::1]:${receiver.port}/`, ...delivery });
    assert.deepEqual([result.status, result.error, result.responseSnippet], [204, undefined, '']);
    assert.equal(receiver.seen[0]?.remoteAddress, '::1');
  });

  test('keeps at most maxResponseBytes (1 KiB by default) of a 1 MiB answer', async () => {
    const receiver = await startReceiver((res) => res.end(Buffer.alloc(1024 * 1024, 'a')));
    const url = `http://127.0.0.1:${receiver.port}/`;
    const result = await sender({ timeoutMs: 5000 }).send({ url, ...delivery });
    assert.equal(result.status, 200);
    assert.equal(result.error, undefined);
    assert.equal(result.responseSnippet, 'a'.repeat(1024), 'the first 1 KiB, for the attempt log');
    const small = await sender({ maxResponseBytes: 10 }).send({ url, ...delivery });
    assert.equal(small.responseSnippet, 'aaaaaaaaaa');
  });

  test('does not follow a redirect: a 302 is just a status', async () => {
    const target = await startReceiver((res) => res.end('should not be reached'));
    const redirecting = await startReceiver((res) =>
      res.writeHead(302, { location: `http://127.0.0.1:${target.port}/` }).end('moved'),
    );
    const result = await sender().send({ url: `http://127.0.0.1:${redirecting.port}/`, ...delivery });
    assert.deepEqual([result.status, result.error, result.responseSnippet], [302, undefined, 'moved']);
    assert.equal(redirecting.seen.length, 1);
    assert.equal(target.connections, 0);
  });

  test('cuts a receiver that never answers at the deadline', async () => {
    const receiver = await startReceiver(() => {});
    const result = await sender().send({ url: `http://127.0.0.1:${receiver.port}/`, ...delivery });
    assert.equal(result.error, 'timeout after 300 ms');
    assert.equal(result.status, undefined);
    assert.ok(result.durationMs >= 290 && result.durationMs < 3000, `${result.durationMs} ms`);
  });

  test('cuts a receiver that sends headers and then trickles its body forever', async () => {
    const receiver = await startReceiver((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const drip = setInterval(() => res.write('.'), 20);
      res.on('close', () => clearInterval(drip));
    });
    // A snippet limit the trickle never fills, so only the deadline can end the attempt.
    const result = await sender({ maxResponseBytes: 1 << 20 }).send({
      url: `http://127.0.0.1:${receiver.port}/`,
      ...delivery,
    });
    assert.equal(result.status, 200);
    assert.equal(result.error, 'timeout after 300 ms');
    assert.ok(result.durationMs >= 290 && result.durationMs < 3000, `${result.durationMs} ms`);
  });

  test('reads the first 1 KiB of an answer that never ends, and does not wait for more', async () => {
    const receiver = await startReceiver((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('b'.repeat(2048));
      const drip = setInterval(() => res.write('.'), 20);
      res.on('close', () => clearInterval(drip));
    });
    const result = await sender().send({ url: `http://127.0.0.1:${receiver.port}/`, ...delivery });
    assert.equal(result.error, undefined, 'not cut by the deadline: it stopped reading at 1 KiB');
    assert.deepEqual([result.status, result.responseSnippet], [200, 'b'.repeat(1024)]);
  });

  test('cuts a resolver that never answers at the deadline', async () => {
    const resolve: Resolve = () => new Promise(() => {});
    const result = await sender({ resolve }).send({ url: 'http://stuck.test/', ...delivery });
    assert.equal(result.error, 'timeout after 300 ms');
  });

  test('reports a closed port as connection refused', async () => {
    const closed = await startReceiver(() => {});
    await closed.close();
    const result = await sender().send({ url: `http://127.0.0.1:${closed.port}/`, ...delivery });
    assert.equal(result.error, 'connection refused');
    assert.equal(result.status, undefined);
    assert.equal(result.refused, undefined, 'a network error, not a refusal by the policy');
  });

  test('reports a name that does not resolve', async () => {
    const result = await sender({ resolve: resolver({}) }).send({ url: 'http://nowhere.test/', ...delivery });
    assert.equal(result.error, 'host nowhere.test not found');
    assert.equal(result.refused, undefined);
  });

  test('refuses a name that resolves to a non-public address, opening no connection', async () => {
    const receiver = await startReceiver((res) => res.end('should not be reached'));
    const resolve = resolver({ 'hooks.example.com': '127.0.0.1' });
    for (const scheme of ['https', 'http']) {
      const strict = sender({ allowPrivate: false, resolve });
      // http is refused by the URL check under the strict policy; https reaches the lookup.
      const result = await strict.send({ url: `${scheme}://hooks.example.com:${receiver.port}/`, ...delivery });
      assert.equal(
        result.error,
        scheme === 'https'
          ? 'refused address 127.0.0.1 for host hooks.example.com (loopback)'
          : 'the webhook URL must use https',
      );
      assert.equal(result.status, undefined);
      assert.equal(result.refused, true, 'a refusal, as the metrics count it');
    }
    assert.deepEqual(resolve.calls, ['hooks.example.com']);
    assert.equal(receiver.connections, 0);
  });

  test('checks a literal address in the URL before any connection', async () => {
    const receiver = await startReceiver((res) => res.end('should not be reached'));
    const resolve = resolver({});
    for (const host of ['127.0.0.1', '2130706433', '[::ffff:127.0.0.1]', 'localhost']) {
      const result = await sender({ allowPrivate: false, resolve }).send({
        url: `https://${host}:${receiver.port}/`,
        ...delivery,
      });
      assert.match(result.error ?? '', /^the webhook URL must point at a public address, not .* \(loopback\)$/, host);
      assert.equal(result.refused, true, host);
    }
    assert.deepEqual(resolve.calls, []);
    assert.equal(receiver.connections, 0);
  });

  test('never throws: a malformed URL and a closed sender are errors', async () => {
    const closed = sender();
    assert.equal(
      (await closed.send({ url: 'not a url', ...delivery })).error,
      'the webhook URL must be an absolute URL',
    );
    await closed.close();
    const result = await closed.send({ url: 'http://127.0.0.1:9/', ...delivery });
    assert.equal(result.error, 'the sender is closed');
  });
});
