import { type ClientRequest, type IncomingHttpHeaders, request } from 'node:http';
import type { Store } from '../../src/store/store.js';
import { eventually as waitFor } from '../support/eventually.js';

// What the tests of a stream's setup and end need: a raw GET /events over its own connection, and
// a store whose setup reads wait at a gate the test opens, so "while the stream is being set up"
// is a state a test holds, not a race it hopes to hit.

export const DEADLINE_MS = 15_000;

/** One GET /events on a connection of its own; its answer read as it arrives. */
export class RawStream {
  status: number | undefined;
  headers: IncomingHttpHeaders = {};
  text = '';
  /** The answer ended cleanly (its last chunk came); false while open, or when it was cut. */
  ended = false;
  /** The connection is gone (ended, cut, or refused). */
  closed = false;
  readonly request: ClientRequest;

  /** With `token` undefined, no Authorization header (a ticket in `path` instead). */
  constructor(port: number, token: string | undefined, headers: Record<string, string> = {}, path = '/events') {
    this.request = request({
      host: '127.0.0.1',
      port,
      path,
      headers: {
        accept: 'text/event-stream',
        ...(token !== undefined && { authorization: `Bearer ${token}` }),
        ...headers,
      },
      agent: false,
    });
    this.request.on('error', () => void (this.closed = true));
    this.request.on('close', () => void (this.closed = true));
    this.request.on('response', (res) => {
      this.status = res.statusCode;
      this.headers = res.headers;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => void (this.text += chunk));
      res.on('end', () => void (this.ended = res.complete));
      res.on('error', () => {});
    });
    this.request.end();
  }

  /** Hangs up, as a client that goes away. */
  destroy(): void {
    this.request.destroy();
  }
}

/** Checks `condition` every few milliseconds until it holds; fails at the deadline. */
export async function eventually(what: string, condition: () => boolean | Promise<boolean>, ms = DEADLINE_MS) {
  await waitFor(async () => ((await condition()) ? true : undefined), what, ms);
}

/** Holds the calls that pass through it while shut; `open()` lets them all go on. */
export class Gate {
  private shut = false;
  private readonly waiting: Array<() => void> = [];

  /** How many calls wait at the gate now. */
  get held(): number {
    return this.waiting.length;
  }

  close(): void {
    this.shut = true;
  }

  open(): void {
    this.shut = false;
    for (const go of this.waiting.splice(0)) go();
  }

  pass<T>(work: () => Promise<T>): Promise<T> {
    if (!this.shut) return work();
    return new Promise<void>((resolve) => this.waiting.push(resolve)).then(work);
  }
}

/** The store, with the reads a stream's setup awaits (lastEventId, eventHorizon) passing through `gate`. */
export function gatedStore(store: Store, gate: Gate): Store {
  return new Proxy(store, {
    get(target, property) {
      if (property === 'lastEventId') return () => gate.pass(() => target.lastEventId());
      if (property === 'eventHorizon') return () => gate.pass(() => target.eventHorizon());
      const value: unknown = Reflect.get(target, property, target);
      // Bound to the store itself: its methods use private fields a proxy does not have.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
