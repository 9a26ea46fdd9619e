import type pg from 'pg';
import { EVENT_CHANNEL } from './statements.js';

// How a PostgreSQL store tells its watchers (the change feed, the dispatcher) that events may have
// committed, on any instance: the NOTIFY each change's statement sends (postgres/statements.ts),
// heard on a connection of its own while anyone watches.

/** LISTEN/NOTIFY on a connection of its own, opened while anyone watches: commits of every instance. */
export class PostgresEventWatch {
  private listener: EventListener | undefined;
  private readonly watchers = new Set<() => void>();

  /** `connect` makes the connection to LISTEN on (with a multi-host URL, one that goes to the primary). */
  constructor(private readonly connect: () => pg.Client) {}

  watch(listener: () => void): () => void {
    this.watchers.add(listener);
    this.listener ??= new EventListener(this.connect, () => {
      for (const watcher of this.watchers) watcher();
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
 * LISTEN on a connection of its own (a pooled one would be handed to other queries), reconnecting
 * after a second when it drops. `listener` is also called on every (re)connect, since a NOTIFY sent
 * while disconnected is lost: the reader then catches up from the log.
 */
class EventListener {
  private client: pg.Client | undefined;
  private closed = false;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly newClient: () => pg.Client,
    private readonly listener: () => void,
  ) {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = this.newClient();
    client.on('notification', () => this.listener());
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENT_CHANNEL}`);
      this.listener();
    } catch {
      this.reconnect(client);
    }
  }

  private reconnect(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    client.end().catch(() => {});
    this.retry = setTimeout(() => void this.connect(), 1000);
    this.retry.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }
}
