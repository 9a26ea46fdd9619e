import { Agent, type IncomingHttpHeaders, request } from 'node:http';
import type { Ledger, StoredPlant } from './ledger.js';

export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** Real HTTP over keep-alive connections; a reply counts only when it arrived whole. */
export class Client {
  private readonly agent: Agent;
  private readonly base: URL;

  constructor(
    url: string,
    private readonly token: string,
    sockets: number,
  ) {
    this.base = new URL(url);
    this.agent = new Agent({ keepAlive: true, maxSockets: sockets });
  }

  send(method: string, path: string, body?: string): Promise<Reply> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(body));
    }
    return new Promise((resolve, reject) => {
      const req = request(
        { agent: this.agent, host: this.base.hostname, port: this.base.port, method, path, headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('close', () => {
            if (!res.complete) reject(new Error(`${method} ${path}: the response was cut off`));
            else resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  /**
   * Every plant the token's owner has, by following the Link header page by page. Names carry the
   * id (the API never shows ids), so the list becomes a map by id, and the order can be checked.
   */
  async list(owner: string): Promise<{ plants: Map<bigint, StoredPlant>; problems: string[] }> {
    const plants = new Map<bigint, StoredPlant>();
    const problems: string[] = [];
    let last: bigint | undefined;
    for (let path: string | undefined = '/plants?limit=1000'; path !== undefined;) {
      const reply = await this.sendRetrying('GET', path);
      if (reply.status !== 200) throw new Error(`GET ${path} answered ${reply.status}: ${reply.body}`);
      for (const plant of JSON.parse(reply.body) as { name: string; tag?: string }[]) {
        const id = /^crash (-?\d+) r\d+$/.exec(plant.name)?.[1];
        if (id === undefined) {
          problems.push(`GET /plants lists ${JSON.stringify(plant)}, which the clients never sent`);
          continue;
        }
        const at = BigInt(id);
        if (last !== undefined && at <= last) problems.push(`GET /plants lists id ${at} after id ${last}`);
        last = at;
        plants.set(at, { owner, name: plant.name, tag: plant.tag ?? null });
      }
      const link = reply.headers.link;
      path = typeof link === 'string' ? /^<([^>]+)>; rel="next"$/.exec(link)?.[1] : undefined;
      if (typeof link === 'string' && path === undefined)
        throw new Error(`GET /plants: a Link header unlike RFC 8288: ${link}`);
    }
    return { plants, problems };
  }

  /** send(), again while the answer is 503 (overload, start-up): the check needs an answer, not speed. */
  private async sendRetrying(method: string, path: string): Promise<Reply> {
    for (let attempt = 1; ; attempt++) {
      const reply = await this.send(method, path);
      if (reply.status !== 503 || attempt === 100) return reply;
      // Shorter than its Retry-After (1 s): the server recovers as soon as its event loop does.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  close(): void {
    this.agent.destroy();
  }
}

export interface LoadResult {
  readonly acked: { readonly creates: number; readonly deletes: number };
  /** 503 answers (overload): the request may or may not have happened, and stays in flight. */
  readonly refused: number;
  /** Answers that break the contract whatever the crash did (a 409 for a fresh id, a 404 for a stored plant…). */
  readonly violations: string[];
}

/**
 * `clients` loops, each sending a create (fresh id) or a delete (of a plant whose create was
 * acknowledged) one after another, recording every send and every answer in the ledger. stop()
 * sends nothing more; the loops end when their last request is answered or its connection dies.
 */
export function startLoad(
  client: Client,
  ledger: Ledger,
  round: number,
  clients: number,
): { stop: () => void; done: Promise<LoadResult> } {
  let stopped = false;
  const acked = { creates: 0, deletes: 0 };
  let refused = 0;
  const violations: string[] = [];

  const createOne = async (): Promise<void> => {
    const { id, name, tag } = ledger.sendCreate(round);
    const body = `{"id":${id},"name":${JSON.stringify(name)}${tag === null ? '' : `,"tag":${JSON.stringify(tag)}`}}`;
    const reply = await client.send('POST', '/plants', body);
    const expected = JSON.stringify(tag === null ? { name } : { name, tag });
    if (reply.status === 200 && reply.body === expected) {
      ledger.ackCreate(id);
      acked.creates += 1;
    } else if (reply.status === 503) {
      refused += 1; // "not now", without saying whether it happened: the create stays in flight
    } else {
      violations.push(`POST /plants id ${id} answered ${reply.status} ${reply.body}; expected 200 ${expected}`);
    }
  };

  const deleteOne = async (id: bigint): Promise<void> => {
    const reply = await client.send('DELETE', `/plants/${id}`);
    if (reply.status === 204) {
      ledger.ackDelete(id);
      acked.deletes += 1;
    } else if (reply.status === 503) {
      refused += 1;
    } else {
      violations.push(`DELETE /plants/${id} of a stored plant answered ${reply.status} ${reply.body}; expected 204`);
    }
  };

  const loop = async (): Promise<void> => {
    while (!stopped) {
      const id = ledger.canDelete && Math.random() < 0.4 ? ledger.sendDelete() : undefined;
      try {
        await (id === undefined ? createOne() : deleteOne(id));
      } catch (error) {
        // Expected once the server is killed; before that, a dropped connection is a finding.
        if (!stopped) violations.push(`a request failed while the server was up: ${String(error)}`);
        return;
      }
    }
  };

  const loops = Array.from({ length: clients }, loop);
  return {
    stop: () => void (stopped = true),
    done: Promise.all(loops).then(() => ({ acked, refused, violations })),
  };
}
