import pg from 'pg';
import { StoreUnavailableError } from '../store.js';

// SQLSTATEs that mean "the database cannot serve this now; the same request may succeed later":
// class 08 connection exception (but not 08P01, a protocol violation: a bug of ours), class 53
// insufficient resources (too many connections, disk full), 57P operator intervention (shutdown,
// restart), 57014 a cancelled or timed-out statement, 25006 a read-only server (writes just after
// a failover), 40001 and 40P01 serialization failure and deadlock.
const RETRYABLE = /^(08(?!P01)|53|57P|57014$|25006$|40001$|40P01$)/;

// What the driver raises itself when the network fails, by Node's system error codes: a
// connection that was never made (nothing of a statement reached a server), one cut while in use
// (a statement may have run), and the rest (a name that does not resolve, a route that is missing).
const NEVER_CONNECTED = new Set([
  'ECONNREFUSED',
  'ENOSERVER', // no server of a multi-host URL is what it asks (NoServerError below)
]);
const CUT = new Set(['ECONNRESET', 'ETIMEDOUT', 'EPIPE']);
const NETWORK = new Set([...NEVER_CONNECTED, ...CUT, 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);
/** pg's own words (its errors carry no code) for a connection cut while in use. */
const CUT_MESSAGE = /Connection terminated|Query read timeout/;
/**
 * pg's own words for a connection not made in time: the pool's, and a client's connect timeout
 * ("timeout expired": raised only while connecting, before any statement was sent).
 */
const CONNECT_TIMEOUT = /timeout exceeded when trying to connect|due to connection timeout|^timeout expired$/;

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

/** No server of the list is what the URL asks, or none answered: retryable (a 503 once the wait is over). */
export class NoServerError extends Error {
  override name = 'NoServerError';
  readonly code = 'ENOSERVER';
}

/** SQLSTATEs after which the server in use is not the one to write to any more. */
const SERVER_GONE = /^(25006|57P0[123]|08)/;

/** Whether `error` says the connection's server went away or turned standby: the router should look again. */
export function serverGone(error: unknown): boolean {
  if (error instanceof pg.DatabaseError) return SERVER_GONE.test(error.code ?? '');
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code ?? '';
  // "timeout expired": a client's connect that timed out; unlike failoverFate, a connection made
  // late counts here, so the router looks again, but a statement is not re-sent for it.
  return (
    NEVER_CONNECTED.has(code) ||
    CUT.has(code) ||
    CUT_MESSAGE.test(error.message) ||
    /timeout expired/.test(error.message)
  );
}

/**
 * What a failure of a statement says of its fate, with a failover in mind: `not-run` when the
 * server never ran it (no connection was made, or a standby refused the write: 25006), so that it
 * is safe to send again; `unknown` when the connection went down while it ran (a reset, a shutdown
 * that terminated it), so that only a statement whose repetition changes nothing may be sent
 * again; undefined for every other failure, which a retry does not cure.
 */
export function failoverFate(error: unknown): 'not-run' | 'unknown' | undefined {
  if (error instanceof pg.DatabaseError) {
    if (error.code === '25006' || error.code === '57P03') return 'not-run';
    return /^(57P0[12]|08)/.test(error.code ?? '') ? 'unknown' : undefined;
  }
  if (!(error instanceof Error)) return undefined;
  const code = (error as NodeJS.ErrnoException).code ?? '';
  if (NEVER_CONNECTED.has(code) || CONNECT_TIMEOUT.test(error.message)) return 'not-run';
  return CUT.has(code) || CUT_MESSAGE.test(error.message) ? 'unknown' : undefined;
}
