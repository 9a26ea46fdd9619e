import type Database from 'better-sqlite3';
import type { SqliteTracing } from './connection.js';

/**
 * How a SQLite store tells its watchers (the change feed, the dispatcher) that events may have
 * committed: after this process's own commits, in the turn after the group commit that wrote them;
 * after another connection's, by a poll of PRAGMA data_version that runs only while someone watches.
 */
export class SqliteEventWatch {
  private readonly watchers = new Set<() => void>();
  private wakeScheduled = false;
  private watchTimer: NodeJS.Timeout | undefined;
  private seenVersion: unknown;
  private dataVersion: Database.Statement | undefined;

  constructor(
    private readonly db: Database.Database,
    private readonly tracing?: SqliteTracing,
  ) {}

  /** After the group commit that wrote them (a later turn), the watchers learn of new events. */
  eventsWritten(): void {
    if (this.wakeScheduled || this.watchers.size === 0) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      for (const watcher of this.watchers) watcher();
    });
  }

  /**
   * Calls `listener` when events may have committed: at once after this process's own commits,
   * and within `pollMs` after another connection's (PRAGMA data_version, checked only while
   * someone watches). Answers the function that stops watching.
   */
  watch(listener: () => void, pollMs: number): () => void {
    this.watchers.add(listener);
    const poll = (): NodeJS.Timeout =>
      setInterval(() => {
        let version: unknown;
        try {
          this.dataVersion ??= this.db.prepare('PRAGMA data_version').pluck();
          version = this.dataVersion.get();
        } catch {
          return; // a lock or a closed database: the next tick tries again
        }
        if (version === this.seenVersion) return;
        this.seenVersion = version;
        for (const watcher of this.watchers) watcher();
      }, pollMs).unref();
    // Outside any trace: a request that happens to start the poll would otherwise own it forever.
    this.watchTimer ??= this.tracing === undefined ? poll() : this.tracing.detached(poll);
    return () => {
      this.watchers.delete(listener);
      if (this.watchers.size === 0 && this.watchTimer) {
        clearInterval(this.watchTimer);
        this.watchTimer = undefined;
      }
    };
  }

  close(): void {
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.watchTimer = undefined;
    this.watchers.clear();
  }
}
