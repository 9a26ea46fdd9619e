import type Database from 'better-sqlite3';

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

interface Pending {
  readonly run: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Group commit: the writes that arrive in one turn of the event loop run in one transaction, so
 * they share one fsync instead of paying one each. Every write still gets its answer only after
 * that commit (a 200 is durable), and each runs in a savepoint of its own, so one that fails fails
 * alone. Under no load a batch is a single write, committed on the next turn (setImmediate).
 */
export class GroupCommit {
  private queue: Pending[] = [];
  private scheduled = false;
  private readonly transaction: Database.Transaction<(batch: Pending[]) => Outcome[]>;

  constructor(db: Database.Database) {
    const savepoint = db.transaction((run: () => unknown) => run());
    this.transaction = db.transaction((batch: Pending[]) =>
      batch.map((item): Outcome => {
        try {
          return { ok: true, value: savepoint(item.run) };
        } catch (error) {
          return { ok: false, error };
        }
      }),
    );
  }

  run<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: write, resolve: resolve as (value: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    let outcomes: Outcome[];
    try {
      // IMMEDIATE: take the write lock up front (other processes wait up to busy_timeout).
      outcomes = this.transaction.immediate(batch);
    } catch (error) {
      for (const item of batch) item.reject(error); // the commit itself failed: nothing was stored
      return;
    }
    outcomes.forEach((outcome, i) => (outcome.ok ? batch[i]!.resolve(outcome.value) : batch[i]!.reject(outcome.error)));
  }
}
