import pg from 'pg';
import { NoServerError, failoverFate, routerOf, serverGone, throughFailover } from './hosts.js';
import { StoreUnavailableError } from '../store.js';

// SQLSTATEs that mean "the database cannot serve this now; the same request may succeed later":
// class 08 connection exception (but not 08P01, a protocol violation: a bug of ours), class 53
// insufficient resources (too many connections, disk full), 57P operator intervention (shutdown,
// restart), 57014 a cancelled or timed-out statement, 25006 a read-only server (writes just after
// a failover), 40001 and 40P01 serialization failure and deadlock.
const RETRYABLE = /^(08(?!P01)|53|57P|57014$|25006$|40001$|40P01$)/;

// What the driver raises itself when the network fails, by Node's system error codes.
const NETWORK = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'EAI_AGAIN',
  'ENOSERVER', // no server of a multi-host URL is what it asks (postgres/hosts.ts)
]);

/** A database error that a retry may cure becomes StoreUnavailableError (a 503); anything else stays as it is. */
export function classifyPostgresError(error: unknown): unknown {
  if (error instanceof pg.DatabaseError) {
    return RETRYABLE.test(error.code ?? '') ? new StoreUnavailableError(error.message, { cause: error }) : error;
  }
  if (!(error instanceof Error) || error instanceof TypeError || error instanceof RangeError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  // pg's own connection errors ("Connection terminated", "timeout exceeded when trying to connect")
  // carry no code; a system error carries one of NETWORK's.
  if (code === undefined || NETWORK.has(code)) return new StoreUnavailableError(error.message, { cause: error });
  return error;
}

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
