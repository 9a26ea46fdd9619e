// The soak's view of the server's memory: a full garbage collection through the V8 inspector,
// then process.memoryUsage() read in the server itself. The server runs with
// --inspect=127.0.0.1:0 (loopback, a port of the kernel's choosing); nothing in the product
// changes for this.
import { WebSocket } from 'undici';

export interface Memory {
  rssMb: number;
  heapUsedMb: number;
  /** The V8 heap's pages, used or not. */
  heapTotalMb: number;
}

/** The inspector's WebSocket address, as Node prints it on the server's stderr. */
export const INSPECTOR_URL = /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/[\w-]+)/;

export class Inspector {
  readonly #socket: WebSocket;
  #next = 1;
  readonly #waiting = new Map<number, (message: { result?: unknown; error?: unknown }) => void>();

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener('message', (event) => {
      const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: unknown };
      if (message.id !== undefined) this.#waiting.get(message.id)?.(message);
    });
  }

  static async connect(url: string): Promise<Inspector> {
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve(), { once: true });
      socket.addEventListener('error', () => reject(new Error(`cannot reach the inspector at ${url}`)), {
        once: true,
      });
    });
    return new Inspector(socket);
  }

  async #call(method: string, params: object = {}): Promise<unknown> {
    const id = this.#next++;
    const answer = new Promise<{ result?: unknown; error?: unknown }>((resolve) => this.#waiting.set(id, resolve));
    this.#socket.send(JSON.stringify({ id, method, params }));
    const message = await answer;
    this.#waiting.delete(id);
    if (message.error) throw new Error(`${method}: ${JSON.stringify(message.error)}`);
    return message.result;
  }

  /** Memory after a full collection: what is still referenced, not what is waiting for the GC. */
  async memoryAfterGc(): Promise<Memory> {
    await this.#call('HeapProfiler.collectGarbage');
    await this.#call('HeapProfiler.collectGarbage');
    const result = (await this.#call('Runtime.evaluate', {
      expression: 'JSON.stringify(process.memoryUsage())',
      returnByValue: true,
    })) as { result: { value: string } };
    const usage = JSON.parse(result.result.value) as { rss: number; heapUsed: number; heapTotal: number };
    return { rssMb: usage.rss / 2 ** 20, heapUsedMb: usage.heapUsed / 2 ** 20, heapTotalMb: usage.heapTotal / 2 ** 20 };
  }

  close(): void {
    this.#socket.close();
  }
}
