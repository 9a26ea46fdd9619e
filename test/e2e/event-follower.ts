import { EventSource } from 'eventsource';
import { eventually } from '../support/eventually.js';

// A standard EventSource client (the WHATWG algorithm, as browsers run it: the `eventsource`
// package) following GET /events, as the change feed's users do. It reconnects by itself; what it
// does on each answer is the specification's, not ours: a network error or a 200 that ends →
// reconnect after the reconnection time (`retry:`, 3 s until one comes); any other status → fail
// for good (readyState 2, CLOSED).

export class Follower {
  /** The ids of the events received, in order (as text: int64 ids never pass through a number). */
  readonly ids: string[] = [];
  /** The `data` of each event received, in the same order. */
  readonly data: string[] = [];
  /** Every error event (each reconnect is one), for a failure's message. */
  readonly errors: string[] = [];
  /** The status of every answer to the client's requests (the first GET and each reconnect), in order. */
  readonly statuses: number[] = [];
  private readonly source: EventSource;

  constructor(url: string, token: string) {
    this.source = new EventSource(`${url}/events`, {
      // EventSource sends no Authorization header of its own: the fetch it uses adds the bearer token.
      fetch: async (input, init) => {
        const response = await fetch(input, {
          ...init,
          headers: { ...init.headers, authorization: `Bearer ${token}` },
        });
        this.statuses.push(response.status);
        return response;
      },
    });
    for (const type of ['plant.created', 'plant.deleted']) {
      this.source.addEventListener(type, (event) => {
        this.ids.push(event.lastEventId);
        this.data.push(event.data as string);
      });
    }
    this.source.addEventListener('error', (event) => {
      this.errors.push(`${event.message ?? ''} (${event.code ?? 'no status'}) → readyState ${this.source.readyState}`);
    });
  }

  get readyState(): number {
    return this.source.readyState;
  }

  /** Until `count` events have come; fails at once if the client gave up (CLOSED), or at the deadline. */
  async received(count: number, ms = 30_000): Promise<void> {
    await eventually(
      async () => {
        if (this.ids.length >= count) return true;
        if (this.source.readyState === EventSource.CLOSED) {
          throw new Error(`the client gave up after ${this.ids.length} of ${count} events: ${this.errors.join('; ')}`);
        }
        return undefined;
      },
      () => `${count} events (${this.ids.length} came): ${this.errors.join('; ')}`,
      ms,
    );
  }

  /** Until the stream is open (its 200 and headers came); fails at once if the client gave up. */
  async opened(ms = 15_000): Promise<void> {
    await eventually(
      async () => {
        if (this.source.readyState === EventSource.OPEN) return true;
        if (this.source.readyState === EventSource.CLOSED) {
          throw new Error(`the stream did not open: ${this.errors.join('; ')}`);
        }
        return undefined;
      },
      () => `the stream open: ${this.errors.join('; ')}`,
      ms,
    );
  }

  close(): void {
    this.source.close();
  }
}
