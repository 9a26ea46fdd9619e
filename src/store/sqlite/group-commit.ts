import type Database from 'better-sqlite3';
import { knockedOut } from '../../knockouts.js';
import { StoreUnavailableError } from '../store.js';

interface Pending {
  readonly write: () => unknown;
  /** Safe to run a second time after a rollback: see `GroupCommit.run`'s `rerunnable`. */
  readonly rerunnable: boolean;
  /** When the write arrived (performance.now()): its own deadline runs from here. */
  readonly since: number;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export interface GroupCommitOptions {
  /** How long a write may wait for another connection's write lock before it fails (503). */
  readonly lockWaitMs?: number;
  /** The longest pause between two tries for the lock. */
  readonly maxBackoffMs?: number;
  /**
   * false: these commits are not fsynced (synchronous=NORMAL for them alone), for state that a
   * crash may lose without harm, such as a webhook delivery's lease. A later durable commit's fsync
   * covers them too. Default true: a 200 is durable (synchronous=FULL).
   */
  readonly durable?: boolean;
}

/** The write lock is held by another connection (SQLITE_BUSY and its extended codes). */
export const isBusy = (error: unknown): boolean =>
  typeof (error as { code?: unknown }).code === 'string' && (error as { code: string }).code.startsWith('SQLITE_BUSY');

/**
 * Group commit: the writes that arrive in one turn of the event loop run in one transaction, so
 * they share one fsync instead of paying one each. Every write still gets its answer only after
 * that commit (a 200 is durable), and one that fails fails alone. Under no load a batch is a single
 * write, committed on the next turn (setImmediate).
 *
 * A write fails alone because it runs in a savepoint of its own, two statements more (SAVEPOINT,
 * RELEASE) than its own, about a fifth of a create's storage CPU. Writes that can be run twice
 * (`rerunnable`: plant creates and deletes) skip them: a batch of only such writes runs in one
 * savepoint, and only if one of them throws is that savepoint rolled back and every write run
 * again in its own. A batch with any other write runs each in its own, as before.
 *
 * The write lock is taken without waiting: better-sqlite3 is synchronous, so a
 * busy_timeout would freeze the whole event loop while another process (an operator's `sqlite3`,
 * an import, another worker) holds the lock. When the lock is taken, the batch stays queued and
 * the attempt is repeated from the event loop after a short, growing pause (1 ms doubling to
 * `maxBackoffMs`); writes that arrive meanwhile join it. A write that has waited `lockWaitMs` fails
 * with StoreUnavailableError (503 with Retry-After): nothing of it was written.
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private backoffMs = 0;
  private readonly lockWaitMs: number;
  private readonly maxBackoffMs: number;
  private readonly begin: Database.Statement;
  private readonly commit: Database.Statement;
  private readonly rollback: Database.Statement;
  private readonly savepoint: (write: () => unknown) => unknown;
  readonly #off = knockedOut('group-commit');

  private readonly durable: boolean;

  constructor(
    private readonly db: Database.Database,
    { lockWaitMs = 3000, maxBackoffMs = 50, durable = true }: GroupCommitOptions = {},
  ) {
    this.durable = durable;
    this.lockWaitMs = lockWaitMs;
    this.maxBackoffMs = maxBackoffMs;
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
    // Called inside the open transaction, better-sqlite3's transaction function is a savepoint.
    this.savepoint = db.transaction((write: () => unknown) => write());
  }

  /**
   * `rerunnable`: the write may be run, rolled back and run again within one batch (it keeps no
   * state outside the database that a rollback would leave wrong; dropping a cache or waking a
   * watcher twice is harmless), so it needs no savepoint of its own while nothing fails.
   */
  run<T>(write: () => T, { rerunnable = false }: { rerunnable?: boolean } = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const pending = {
        write,
        rerunnable,
        since: performance.now(),
        resolve: resolve as (value: unknown) => void,
        reject,
      };
      // A benchmark's knock-out (src/knockouts.ts): each write committed alone, at once.
      if (this.#off) return this.commitBatch([pending]);
      this.queue.push(pending);
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    if (this.backoffMs === 0) setImmediate(this.flush);
    else setTimeout(this.flush, this.backoffMs);
  }

  private readonly flush = (): void => {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    if (this.durable) return this.commitBatch(batch);
    this.db.pragma('synchronous = NORMAL');
    try {
      this.commitBatch(batch);
    } finally {
      this.db.pragma('synchronous = FULL');
    }
  };

  private commitBatch(batch: Pending[]): void {
    try {
      this.begin.run();
    } catch (error) {
      if (isBusy(error)) return this.waitForLock(batch);
      for (const p of batch) p.reject(error);
      return;
    }
    this.backoffMs = 0;
    let outcomes: Outcome[];
    try {
      outcomes = this.runTogether(batch) ?? batch.map(this.runAlone);
      this.commit.run();
    } catch (error) {
      // The commit failed, or SQLite ended the transaction under a write (runTogether): nothing was
      // stored, and every write of the batch fails.
      if (this.db.inTransaction) this.rollback.run();
      const cause = isBusy(error) ? new StoreUnavailableError('the database is locked', { cause: error }) : error;
      for (const p of batch) p.reject(cause);
      return;
    }
    batch.forEach((p, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) p.resolve(outcome.value);
      else p.reject(outcome.error);
    });
  }

  /** A write in a savepoint of its own: if it throws, it alone is rolled back. */
  private readonly runAlone = (p: Pending): Outcome => {
    try {
      return { ok: true, value: this.savepoint(p.write) };
    } catch (error) {
      return { ok: false, error }; // this write alone fails
    }
  };

  /**
   * A batch of rerunnable writes alone, in one savepoint. Undefined when the batch holds another
   * kind of write (it would run a second time if a later write threw), or when one of the writes
   * threw: the savepoint is rolled back, and the caller runs each write alone. Where SQLite ended
   * the whole transaction on that error (a full disk, an I/O error), nothing of the batch is left
   * to keep, and the error fails them all.
   */
  private runTogether(batch: Pending[]): Outcome[] | undefined {
    if (!batch.every((p) => p.rerunnable)) return undefined;
    try {
      return this.savepoint(() => batch.map((p): Outcome => ({ ok: true, value: p.write() }))) as Outcome[];
    } catch (error) {
      if (!this.db.inTransaction) throw error;
      return undefined;
    }
  }

  /** Another connection holds the write lock: fail the writes past their deadline, try again later. */
  private waitForLock(batch: Pending[]): void {
    const now = performance.now();
    const waiting: Pending[] = [];
    for (const p of batch) {
      if (now - p.since >= this.lockWaitMs) {
        p.reject(
          new StoreUnavailableError(`another connection held the database's write lock for ${this.lockWaitMs} ms`),
        );
      } else waiting.push(p);
    }
    this.queue = waiting.concat(this.queue);
    if (this.queue.length === 0) {
      this.backoffMs = 0;
      return;
    }
    this.backoffMs = Math.min(Math.max(1, this.backoffMs * 2), this.maxBackoffMs);
    this.schedule();
  }
}
