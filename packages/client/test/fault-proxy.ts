import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { Socket } from 'node:net';

/**
 * What the proxy does to one request instead of passing it through:
 * - `lose-answer`: forwards it (the server acts on it), then drops the connection unanswered;
 * - `hang`: never answers;
 * - a status: answers it itself, with an Error body, without forwarding.
 */
export type Fault = 'lose-answer' | 'hang' | { status: number; headers?: Record<string, string> };

export interface Seen {
  readonly method: string;
  readonly url: string;
  readonly requestId: string | undefined;
  /** What the server answered; undefined when the request was not forwarded. */
  upstreamStatus?: number;
}

const FORWARDED = ['authorization', 'content-type', 'accept', 'x-request-id'];
const RETURNED = ['content-type', 'link', 'retry-after', 'x-request-id', 'www-authenticate'];

/** An HTTP proxy in front of the real server that injects failures into chosen requests. */
export class FaultProxy {
  readonly seen: Seen[] = [];
  readonly #faults: Array<{ method: string; fault: Fault }> = [];
  readonly #sockets = new Set<Socket>();

  private constructor(
    readonly url: string,
    readonly server: Server,
    private readonly target: string,
  ) {}

  static async start(target: string): Promise<FaultProxy> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const proxy = new FaultProxy(`http://127.0.0.1:${port}`, server, target);
    server.on('connection', (socket) => {
      proxy.#sockets.add(socket);
      socket.once('close', () => proxy.#sockets.delete(socket));
    });
    server.on('request', (request, response) => void proxy.#handle(request, response));
    return proxy;
  }

  /** The next request with this method meets `fault`; faults queue up in order. */
  inject(method: string, ...faults: Fault[]): this {
    for (const fault of faults) this.#faults.push({ method, fault });
    return this;
  }

  /** How many requests with this method arrived. */
  count(method: string): number {
    return this.seen.filter((s) => s.method === method).length;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  async #handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const method = request.method ?? 'GET';
    const header = request.headers['x-request-id'];
    const seen: Seen = { method, url: request.url ?? '/', requestId: typeof header === 'string' ? header : undefined };
    this.seen.push(seen);
    const at = this.#faults.findIndex((f) => f.method === method);
    const fault = at >= 0 ? this.#faults.splice(at, 1)[0]!.fault : undefined;
    if (fault === 'hang') return;
    if (typeof fault === 'object') {
      const body = JSON.stringify({ error: fault.status, message: `injected ${fault.status}` });
      response.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers }).end(body);
      return;
    }
    const headers: Record<string, string> = {};
    for (const name of FORWARDED) {
      const value = request.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
    const upstream = await fetch(new URL(seen.url, this.target), { method, headers, body });
    const text = await upstream.text();
    seen.upstreamStatus = upstream.status;
    if (fault === 'lose-answer') {
      request.socket.destroy(); // the server has acted; its answer never reaches the client
      return;
    }
    const returned: Record<string, string> = {};
    for (const name of RETURNED) {
      const value = upstream.headers.get(name);
      if (value !== null) returned[name] = value;
    }
    response.writeHead(upstream.status, returned).end(text);
  }
}
