import { randomInt } from 'node:crypto';
import type { EventStream } from './event-stream.js';
import type { EventTail } from './event-tail.js';
import type { TicketHolder } from './event-tickets.js';

/**
 * What a stream was opened with: a bearer credential, or (a ticket spent) the token behind it.
 * Held in memory only, for the checks of its token; never logged.
 */
export type StreamCredential = string | TicketHolder;

/**
 * Whether a stream's credential is still accepted: false once it is refused (revoked, expired);
 * true while it cannot be judged (the store or the identity provider away).
 */
export type CredentialCheck = (credential: StreamCredential) => Promise<boolean>;

/** One check per distinct token: the streams of one bearer credential, or of one token's tickets, share it. */
const checkKey = (credential: StreamCredential): string =>
  typeof credential === 'string' ? credential : `ticket ${credential.tokenId}`;

/**
 * How often the tokens of open streams are checked again. A stream must end within 5 s of its
 * token's revocation or expiry (docs/api.md#the-change-feed); a revocation made
 * elsewhere reaches this process within the token cache's 2 s, and this adds at most 1 s.
 */
const TOKEN_CHECK_MS = 1000;

/**
 * Token checks in flight at once. A check that is not cached is a query; thousands sent at once
 * would queue ahead of every request and of the tail's reads in the store's pool (on PostgreSQL an
 * event would wait behind thousands of lookups), so a few at a time go, one after another.
 */
const CHECKS_AT_ONCE = 4;

/**
 * The `retry:` hint of each stream: a reconnection time between 1 and 2 s, drawn per stream, so that
 * the clients of the streams a restart ends at once come back spread over a second (decisions.md).
 */
export const reconnectionTime = (): number => 1000 + randomInt(1000);

/** A token's place among its open streams: taken before any wait, released once. */
export interface Place {
  release(): void;
}

/**
 * The open streams of this process (GET /events), their places per token, and the checks of their
 * tokens; a shutdown ends them all once no new connection can reach this process any more.
 */
export class EventStreams {
  readonly streams = new Set<EventStream>();
  /** Set by endAll: streams are ending; a stream request now gets 200 with `retry:` and an end at once. */
  closing = false;
  private readonly places = new Map<string, number>();
  /** Each stream's credential, held in memory only for its checks, never logged. */
  private readonly credentials = new Map<EventStream, StreamCredential>();
  private checks: NodeJS.Timeout | undefined;
  private checking = false;
  private tail: EventTail | undefined;

  constructor(private readonly stillAccepted?: CredentialCheck) {}

  /**
   * A place for one more stream of this token, or undefined past `max`. Taken synchronously, before
   * the stream's setup awaits the database, so that a burst cannot all read the same count and
   * together pass the limit of docs/api.md#the-change-feed.
   */
  take(tokenId: string, max: number): Place | undefined {
    const count = this.places.get(tokenId) ?? 0;
    if (count >= max) return undefined;
    this.places.set(tokenId, count + 1);
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        const left = (this.places.get(tokenId) ?? 1) - 1;
        if (left === 0) this.places.delete(tokenId);
        else this.places.set(tokenId, left);
      },
    };
  }

  add(stream: EventStream, credential: StreamCredential | undefined): void {
    this.streams.add(stream);
    if (credential !== undefined) this.credentials.set(stream, credential);
    if (this.checks === undefined && this.stillAccepted !== undefined) {
      this.checks = setInterval(() => void this.checkTokens(), TOKEN_CHECK_MS);
      this.checks.unref();
    }
  }

  delete(stream: EventStream): void {
    this.streams.delete(stream);
    this.credentials.delete(stream);
    if (this.streams.size > 0) return;
    clearInterval(this.checks);
    this.checks = undefined;
  }

  /** The tail whose subscribers `subscribers` counts. */
  useTail(tail: EventTail): void {
    this.tail = tail;
  }

  /** How many streams the tail feeds: the open streams, once each has set up. */
  get subscribers(): number {
    return this.tail?.size ?? 0;
  }

  /**
   * Ends every stream cleanly; each client reconnects after its `retry:` time and resumes with
   * Last-Event-ID, on another worker or instance, or here once the server is back.
   */
  endAll(): void {
    this.closing = true;
    for (const stream of [...this.streams]) stream.end('the server is restarting; reconnect to resume the feed');
  }

  /** Ends the streams whose token is no longer accepted; one check per distinct token. */
  private async checkTokens(): Promise<void> {
    if (this.checking || this.stillAccepted === undefined) return;
    this.checking = true;
    try {
      const byCredential = new Map<string, [StreamCredential, EventStream[]]>();
      for (const [stream, credential] of this.credentials) {
        const key = checkKey(credential);
        const same = byCredential.get(key);
        if (same) same[1].push(stream);
        else byCredential.set(key, [credential, [stream]]);
      }
      const checks = [...byCredential.values()];
      const lane = async (): Promise<void> => {
        for (let check = checks.pop(); check !== undefined; check = checks.pop()) {
          const [credential, streams] = check;
          if (await this.stillAccepted!(credential)) continue;
          for (const stream of streams) stream.end('the token was revoked or has expired');
        }
      };
      await Promise.all(Array.from({ length: CHECKS_AT_ONCE }, lane));
    } finally {
      this.checking = false;
    }
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The change feed's open streams (GET /events). */
    eventStreams: EventStreams;
  }
}
