import { once } from 'node:events';
import { type IncomingHttpHeaders, type Server, createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

/** One POST the receiver got, as it arrived, and whether its signature verified. */
export interface Received {
  readonly id: string;
  readonly type: string;
  readonly body: string;
  readonly verified: boolean;
  readonly headers: IncomingHttpHeaders;
}

export type Answer = (request: Received, attempt: number) => number | Promise<number>;

/**
 * A webhook receiver on 127.0.0.1, the only kind of address a test may deliver to. It verifies
 * each delivery with the `standardwebhooks` package (an independent implementation of the
 * signature), records it, and answers what `answer` says (200 by default). It counts, per
 * webhook-id, how many deliveries of one event are in its hands at once.
 */
export class Receiver {
  readonly received: Received[] = [];
  /** The most deliveries of one webhook-id it held at once, over the whole run. */
  maxConcurrentPerId = 0;
  private readonly holding = new Map<string, number>();
  private readonly attempts = new Map<string, number>();
  private server: Server | undefined;
  private verifier: Webhook | undefined;
  private waiters: Array<() => void> = [];
  port = 0;

  constructor(private answer: Answer = () => 200) {}

  set secret(secret: string) {
    this.verifier = new Webhook(secret);
  }

  respondWith(answer: Answer): void {
    this.answer = answer;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  /** Listens on `port` (0: any); a receiver that was stopped comes back on its old port. */
  async start(port = this.port): Promise<void> {
    const server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const id = String(req.headers['webhook-id']);
        const now = (this.holding.get(id) ?? 0) + 1;
        this.holding.set(id, now);
        this.maxConcurrentPerId = Math.max(this.maxConcurrentPerId, now);
        let verified = false;
        try {
          this.verifier?.verify(body, req.headers as Record<string, string>);
          verified = this.verifier !== undefined;
        } catch {
          verified = false;
        }
        const received: Received = {
          id,
          type: String(req.headers['plant-store-event']),
          body,
          verified,
          headers: req.headers,
        };
        const attempt = (this.attempts.get(id) ?? 0) + 1;
        this.attempts.set(id, attempt);
        void Promise.resolve(this.answer(received, attempt)).then((status) => {
          this.holding.set(id, (this.holding.get(id) ?? 1) - 1);
          if (status >= 200 && status < 300) this.received.push(received);
          res.writeHead(status).end();
          for (const wake of this.waiters.splice(0)) wake();
        });
      });
    });
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  }

  /** Resolves once `predicate` holds for what was accepted (2xx), or fails after `ms`: a deadline, not a speed. */
  async until(predicate: (received: readonly Received[]) => boolean, ms = 20_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!predicate(this.received)) {
      if (Date.now() > deadline) {
        throw new Error(`the receiver did not get what was expected within ${ms} ms; it has ${this.received.length}`);
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
  }

  /** The accepted bodies by webhook-id (the last accepted one), and how many ids came more than once. */
  byId(): { bodies: Map<string, Received>; duplicates: number } {
    const bodies = new Map<string, Received>();
    let duplicates = 0;
    for (const r of this.received) {
      if (bodies.has(r.id)) duplicates += 1;
      bodies.set(r.id, r);
    }
    return { bodies, duplicates };
  }
}
