import type pg from 'pg';
import { NoServerError, classifyPostgresError, failoverFate, serverGone } from './errors.js';
import { routerOf, throughFailover } from './hosts.js';

// A transaction on a connection of its own, as every write of the PostgreSQL engine runs: rolled
// back and classified when it fails, and run again across a failover when nothing of it can have
// committed.

/**
 * Runs `work` in a transaction on a connection of its own; a failure rolls back and is classified.
 * With more than one server, a transaction that failed for a failover before its COMMIT was sent
 * (nothing of it can have committed) runs again on the new primary, for up to DATABASE_FAILOVER_WAIT.
 */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  try {
    return await throughFailover(routerOf(pool), false, () => transactionOnce(pool, work));
  } catch (error) {
    throw classifyPostgresError(error instanceof CommitUnknown ? error.cause : error);
  }
}

/** A failure while COMMIT was on its way: the transaction may have committed, so it is not run again. */
class CommitUnknown extends Error {}

async function transactionOnce<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  let committing = false;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    committing = true;
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // A connection whose server went away or turned standby is dropped, not pooled again.
    if (serverGone(error)) broken = error as Error;
    else await client.query('ROLLBACK').catch(() => {});
    // Before COMMIT, a connection that went down took the whole transaction with it: the same as
    // not run. At COMMIT, nobody knows: the caller gets the failure (a 503) instead of a second run.
    if (!committing && failoverFate(error) === 'unknown')
      throw new NoServerError((error as Error).message, { cause: error });
    throw committing ? new CommitUnknown('commit outcome unknown', { cause: error }) : error;
  } finally {
    client.release(broken);
  }
}
