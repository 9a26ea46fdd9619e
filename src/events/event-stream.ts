import type { ServerResponse } from 'node:http';
import type { EventRecord, EventStore, EventType } from '../store/event-store.js';
import { PAGE, type TailSubscriber } from './event-tail.js';
import type { TypeFilter } from './event-types-query.js';

/** A stream whose client reads slower than this many bytes are queued is closed; it may resume. */
const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/** Events that arrive live while a stream still catches up from the log wait here, up to this many. */
const MAX_HELD = 10_000;
/**
 * The catch-up reads the next page of the log only once fewer bytes than this wait in the socket:
 * it follows the client, so a client that reads as fast as it can receives the whole backlog on
 * one connection, and the process never holds more than this much of it per stream.
 */
const CATCH_UP_QUEUED_BYTES = 256 * 1024;
/** A catch-up whose client has read nothing for this long is ended, as a slow reader is; it resumes later. */
const CATCH_UP_STALL_MS = 60_000;

/** One Server-Sent Events message (WHATWG HTML, §9.2): id, event type, the payload on one data line. */
export const sseMessage = (event: EventRecord): string =>
  `id: ${event.id}\nevent: ${event.type}\ndata: ${event.payload}\n\n`;

const CRLF = Buffer.from('\r\n');

/**
 * What a stream sends: its text, and that text as one chunk of a chunked HTTP/1.1 body (RFC 9112
 * §7.1: size in hex, CRLF, the bytes, CRLF), made once however many streams send it.
 */
class Outgoing {
  private framed: Buffer | undefined;

  constructor(readonly text: string) {}

  get chunk(): Buffer {
    if (this.framed === undefined) {
      const bytes = Buffer.from(this.text);
      this.framed = Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, CRLF]);
    }
    return this.framed;
  }
}

const KEEP_ALIVE = new Outgoing(': keep-alive\n\n');
/** The tail offers an event to every stream in a row: its message is made once, for all of them. */
let last: { readonly event: EventRecord; readonly outgoing: Outgoing } | undefined;

function outgoingOf(event: EventRecord): Outgoing {
  if (last?.event !== event) last = { event, outgoing: new Outgoing(sseMessage(event)) };
  return last.outgoing;
}

/**
 * One open `GET /events`: first the log from `after` on (its own reads, page by page), then what
 * the tail hands it. Events the tail offers during the catch-up are held and sent after it, past
 * the cursor: each event is sent once, in id order.
 */
export class EventStream implements TailSubscriber {
  private cursor: bigint;
  private held: EventRecord[] | undefined = [];
  private overflowed = false;
  private closed = false;
  /** The types the store reads for this stream (?types=); null: every type. */
  private readonly typeList: readonly EventType[] | null;

  constructor(
    private readonly response: ServerResponse,
    private readonly store: EventStore,
    /** Whose plants' events it may see; null: every plant's (plants:admin). */
    private readonly owner: string | null,
    after: bigint,
    private readonly onClose: () => void,
    /** Only events of these types (?types=); null: every type. */
    private readonly types: TypeFilter = null,
    /** The head declared a chunked body (stream-response.ts, chunkedBody): what is written is framed so. */
    private readonly chunked = false,
  ) {
    this.cursor = after;
    this.typeList = types === null ? null : [...types];
    response.on('close', () => this.close());
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Sends the log after the cursor, then switches to live events. */
  async catchUp(): Promise<void> {
    do {
      this.overflowed = false;
      for (;;) {
        if (this.closed) return;
        const events = await this.store.readEvents(this.cursor, this.owner, PAGE, this.typeList);
        for (const event of events) this.send(event);
        if (events.length < PAGE) break;
        // A store that answers at once (SQLite) would otherwise read the whole backlog in one turn
        // of the event loop, holding every other request for it.
        if (!(await this.readerCaughtUp())) return;
      }
      // Live events were dropped from the hold while reading: they are in the log; read on.
    } while (this.overflowed);
    const held = this.held ?? [];
    this.held = undefined;
    for (const event of held) this.send(event);
  }

  offer(event: EventRecord): void {
    if (this.closed || (this.owner !== null && event.owner !== this.owner)) return;
    if (this.types !== null && !this.types.has(event.type)) return;
    if (this.held === undefined) return this.send(event);
    this.held.push(event);
    // A catch-up that falls this far behind reads the log again from its cursor rather than hold more.
    if (this.held.length > MAX_HELD) {
      this.held = [];
      this.overflowed = true;
    }
  }

  /**
   * Waits until the client has taken what was sent (fewer than CATCH_UP_QUEUED_BYTES queued), and
   * at least until the event loop's next turn. False when the stream closed meanwhile, or was ended
   * because its client read nothing for CATCH_UP_STALL_MS.
   */
  private async readerCaughtUp(): Promise<boolean> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    const socket = this.response.socket;
    const target = this.chunked && socket !== null && !socket.destroyed ? socket : this.response;
    if (!this.closed && target.writableLength >= CATCH_UP_QUEUED_BYTES) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(stalled);
          target.off('drain', done);
          this.response.off('close', done);
          resolve();
        };
        const stalled = setTimeout(() => {
          this.end();
          done();
        }, CATCH_UP_STALL_MS);
        target.on('drain', done);
        this.response.on('close', done);
      });
    }
    return !this.closed;
  }

  heartbeat(): void {
    this.write(KEEP_ALIVE);
  }

  private send(event: EventRecord): void {
    if (event.id <= this.cursor) return;
    this.cursor = event.id;
    this.write(outgoingOf(event));
  }

  /**
   * One write to the socket per stream, of bytes shared by every stream: the answer's own write()
   * would cut each message into four pieces (size, CRLF, text, CRLF), cork the socket and send them
   * with writev on the next tick, stream by stream (the fan-out's CPU: BENCHMARKS.md, "Scale"). The
   * head, already sent, declared the chunks, and what end() sends after them Node frames by that
   * header (test/events/stream-wire.test.ts holds Node to both). Until the response has its
   * connection (behind a pipelined request) write() queues in order; HTTP/1.0 has no chunks. A
   * reader too slow for MAX_QUEUED_BYTES is ended; it resumes with Last-Event-ID.
   */
  private write(outgoing: Outgoing): void {
    if (this.closed) return;
    const socket = this.response.socket;
    if (this.chunked && socket !== null && !socket.destroyed) {
      socket.write(outgoing.chunk);
      if (socket.writableLength > MAX_QUEUED_BYTES) this.end();
    } else {
      this.response.write(outgoing.text);
      if (this.response.writableLength > MAX_QUEUED_BYTES) this.end();
    }
  }

  /**
   * Ends the stream (shutdown, a slow reader, a token no longer accepted); the client reconnects
   * with Last-Event-ID. `why`, when given, goes first as a comment line, for whoever reads the stream.
   */
  end(why?: string): void {
    if (this.closed) return;
    this.response.end(why === undefined ? undefined : `: ${why}\n\n`);
    this.close();
  }

  private close(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}
