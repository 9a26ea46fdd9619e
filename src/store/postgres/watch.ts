import type pg from 'pg';
import { cutConnection } from './host-probe.js';
import { EVENT_CHANNEL } from './statements.js';
import { ANY_PUBLISHED, type EventsPublished } from '../event-store.js';

// How a PostgreSQL store tells its watchers (the change feed, the dispatcher) that events were
// published, on any instance: the NOTIFY a round of the event watermark sends when it moves it
// (migration 11, postgres/publication.ts), heard on a connection of its own while anyone watches.

const NO_WEBHOOK: EventsPublished = { webhooksActive: false };

/** What a round's NOTIFY says: its payload is the watermark, then ' webhooks' while one is active. */
const publishedBy = (payload: string | undefined): EventsPublished =>
  payload !== undefined && /^\d+$/.test(payload) ? NO_WEBHOOK : ANY_PUBLISHED;

/** The watermark a round's NOTIFY carries (undefined: a wake that carries none, a reconnection). */
const watermarkOf = (payload: string | undefined): bigint | undefined => {
  const digits = payload === undefined ? undefined : /^\d+/.exec(payload)?.[0];
  return digits === undefined ? undefined : BigInt(digits);
};

/** LISTEN/NOTIFY on a connection of its own, opened while anyone watches: the watermark's moves. */
export class PostgresEventWatch {
  private listener: EventListener | undefined;
  private readonly watchers = new Set<(published: EventsPublished) => void>();

  /**
   * `connect` makes the connection to LISTEN on (with a multi-host URL, one that goes to the
   * primary); `heard` is told of every NOTIFY (and the watermark it carries), before the watchers.
   */
  constructor(
    private readonly connect: () => pg.Client,
    private readonly heard: (through: bigint | undefined) => void = () => {},
  ) {}

  watch(listener: (published: EventsPublished) => void): () => void {
    this.watchers.add(listener);
    this.listener ??= new EventListener(this.connect, (payload) => {
      this.heard(watermarkOf(payload));
      const published = publishedBy(payload);
      for (const watcher of this.watchers) watcher(published);
    });
    return () => {
      this.watchers.delete(listener);
      if (this.watchers.size === 0) {
        void this.listener?.close();
        this.listener = undefined;
      }
    };
  }

  async close(): Promise<void> {
    this.watchers.clear();
    await this.listener?.close();
    this.listener = undefined;
  }
}

/**
 * A LISTEN connection only waits, so a server that goes silent (frozen, partitioned: no reset, no
 * close) would leave it waiting for notifications that never come, and the feeds it wakes would
 * stall for good. A round trip every CHECK_EVERY_MS that is not answered within CHECK_WITHIN_MS
 * cuts it, and it reconnects wherever the URL now leads: a silent server is left within 10 s, the
 * default DATABASE_FAILOVER_WAIT, whatever the URL (one host, a proxy, a DNS name that moves).
 */
const CHECK_EVERY_MS = 5000;
const CHECK_WITHIN_MS = 5000;

/**
 * LISTEN on a connection of its own (a pooled one would be handed to other queries), reconnecting
 * after a second when it drops or stops answering. `listener` is also called on every (re)connect,
 * since a NOTIFY sent while disconnected is lost: the reader then catches up from the log.
 */
class EventListener {
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;
  private checks: NodeJS.Timeout | undefined;

  constructor(
    private readonly newClient: () => pg.Client,
    /** Called with a NOTIFY's payload, or with undefined on every (re)connection. */
    private readonly listener: (payload: string | undefined) => void,
  ) {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = this.newClient();
    client.on('notification', (message) => this.listener(message.payload ?? ''));
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENT_CHANNEL}`);
      this.checkAnswers(client);
      this.listener(undefined);
    } catch {
      this.reconnect(client);
    }
  }

  private checkAnswers(client: pg.Client): void {
    let waiting = false;
    clearInterval(this.checks);
    this.checks = setInterval(() => {
      if (waiting || this.client !== client) return;
      waiting = true;
      const deadline = setTimeout(
        () => cutConnection(client, new Error('the LISTEN connection stopped answering')),
        CHECK_WITHIN_MS,
      );
      deadline.unref();
      client.query('SELECT 1').then(
        () => {
          waiting = false;
          clearTimeout(deadline);
        },
        () => clearTimeout(deadline), // the connection failed: 'error' or 'end' reconnects it
      );
    }, CHECK_EVERY_MS);
    this.checks.unref();
  }

  private reconnect(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    clearInterval(this.checks);
    // A cut connection has nothing left to say goodbye on; end() on it only settles.
    client.end().catch(() => {});
    this.retry = setTimeout(() => void this.connect(), 1000);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.checks);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
