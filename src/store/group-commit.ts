import type Database from 'better-sqlite3';
import { TurnBatch, failed } from './batcher.js';

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Group commit: the writes that arrive in one turn of the event loop run in one transaction, so
 * they share one fsync instead of paying one each. Every write still gets its answer only after
 * that commit (a 200 is durable), and each runs in a savepoint of its own, so one that fails fails
 * alone. Under no load a batch is a single write, committed on the next turn (setImmediate).
 */
export class GroupCommit {
  private readonly batch: TurnBatch<() => unknown, unknown>;

  constructor(db: Database.Database) {
    const savepoint = db.transaction((run: () => unknown) => run());
    const transaction = db.transaction((writes: ReadonlyArray<() => unknown>) =>
      writes.map((write): Outcome => {
        try {
          return { ok: true, value: savepoint(write) };
        } catch (error) {
          return { ok: false, error }; // this write alone fails
        }
      }),
    );
    // IMMEDIATE: take the write lock up front (other processes wait up to busy_timeout). If the
    // commit itself fails, nothing was stored and every write of the batch fails.
    this.batch = new TurnBatch((writes) =>
      transaction.immediate(writes).map((o) => (o.ok ? o.value : failed(o.error))),
    );
  }

  run<T>(write: () => T): Promise<T> {
    return this.batch.submit(write) as Promise<T>;
  }
}
