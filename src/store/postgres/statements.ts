import type pg from 'pg';
import { classifyPostgresError } from './errors.js';
import { routerOf, throughFailover } from './hosts.js';

// The SQL of the PostgreSQL adapter: every statement is named and prepared once per connection.

// pg reads BIGINT as text, never as a JS number. (A cast here, `id::text`, would make ORDER BY id
// sort the text: output column names win in ORDER BY.)
const SELECT_PLANT = 'SELECT id, owner, name, tag FROM plants';

/** The database's clock, in milliseconds since the epoch: the one clock every instance and the CLI share. */
export const DB_NOW_MS = '(extract(epoch FROM now()) * 1000)::bigint';

/**
 * The event-order lock (an arbitrary, fixed key): every writer of events holds it shared until its
 * end (migration 11's trigger), a change to the set of active webhooks exclusive.
 */
export const EVENT_ORDER_LOCK = 7_316_002;
/** The LISTEN/NOTIFY channel that says "the event watermark moved" (its payload: the new one). */
export const EVENT_CHANNEL = 'plant_store_events';
/**
 * The event watermark: every event with an id at or below it that will ever commit has committed
 * (postgres/publication.ts). Whatever reads events in id order reads no further, so that no
 * reader passes an id whose transaction commits later.
 */
export const PUBLISHED = '(SELECT through FROM event_watermark)';
/** Whether any webhook is active: events are owed deliveries only then (the delivery cursor, docs/events.md). */
export const ANY_ACTIVE = "EXISTS (SELECT 1 FROM webhooks WHERE status = 'active')";

/** Plants in id order from $n+1, at most $n+2 of them, filtered by equality on `columns` ($1…$n). */
function list(columns: string[]): string {
  const where = columns.map((column, i) => `${column} = $${i + 1} AND `).join('');
  return `${SELECT_PLANT} WHERE ${where}id >= $${columns.length + 1} ORDER BY id LIMIT $${columns.length + 2}`;
}

/**
 * A change and its events in one statement, so one commits with the other or neither does
 * (docs/api.md, Events). `change` returns (id, owner, payload) for each row it changed.
 *
 * Event ids are taken from a sequence before the commit, so they may commit out of order; readers
 * stay below the event watermark (PUBLISHED), which passes an id only once every transaction that
 * could still commit a smaller one has ended. Writers never wait for each other: the statement
 * trigger on events (migration 11) takes the event-order lock shared and the transaction's id
 * before the event ids. Deliveries are not made here but by the dispatchers, from the log behind
 * a cursor (postgres/deliveries.ts, fanOut): a create costs one event row whatever the webhooks.
 */
function withEvents(change: string, type: string): string {
  return `WITH ${change},
    event AS (
      INSERT INTO events (type, owner, plant_id, payload, created_at)
      SELECT '${type}', changed.owner, changed.id, changed.payload, ${DB_NOW_MS}
      FROM changed ORDER BY changed.id
      RETURNING id)
    SELECT id FROM changed`;
}

/**
 * Deletes of a batch, one statement: $1 the ids (each once, in id order), $2 for each the owner
 * whose plant it must be, or null for any owner (plants:admin).
 */
const deleteBatch = withEvents(
  `changed AS (
      DELETE FROM plants p USING unnest($1::bigint[], $2::text[]) AS d(id, owner)
      WHERE p.id = d.id AND (d.owner IS NULL OR p.owner = d.owner)
      RETURNING p.id, p.owner, '{"id":' || p.id::text || '}' AS payload)`,
  'plant.deleted',
);

export const STATEMENTS = {
  listAll: list([]),
  listTag: list(['tag']),
  listOwner: list(['owner']),
  listOwnerTag: list(['owner', 'tag']),
  deleteBatch,
  // One statement for a batch (of creates, or of an import): atomic, and rows with ids already held
  // are skipped, not overwritten. $5 carries each plant's plant.created payload, made by the caller.
  insertBatch: withEvents(
    `input AS (
        SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[]) AS t(id, owner, name, tag, payload)),
      inserted AS (
        INSERT INTO plants (id, owner, name, tag) SELECT id, owner, name, tag FROM input
        ON CONFLICT (id) DO NOTHING RETURNING id),
      changed AS (SELECT input.id, input.owner, input.payload FROM inserted JOIN input USING (id))`,
    'plant.created',
  ),
  byIds: `${SELECT_PLANT} WHERE id = ANY($1::bigint[])`,
  // Token times are the database's clock, never the calling host's: created_at is now(),
  // an expiry is now() + the lifetime asked for ($5, ms), a revocation is stamped now().
  tokenInsert: `INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at)
    VALUES ($1, $2, $3, $4, ${DB_NOW_MS}, ${DB_NOW_MS} + $5::bigint, NULL)`,
  tokenById: `SELECT *, ${DB_NOW_MS} AS read_at FROM api_tokens WHERE id = $1`,
  // Through api_tokens_created and api_tokens_subject (migration 8): a page at any place in O(log n).
  tokenPage: 'SELECT * FROM api_tokens WHERE (created_at, id) > ($1, $2) ORDER BY created_at, id LIMIT $3',
  tokenPageOfSubject: `SELECT * FROM api_tokens WHERE subject = $1 AND (created_at, id) > ($2, $3)
    ORDER BY created_at, id LIMIT $4`,
  tokenRevoke: `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ${DB_NOW_MS}) WHERE id = $1`,
  // A ticket's 60 s run on the database's clock too, whichever instance made or spends it. The insert
  // forgets the tickets that ran out unspent; the spend is a delete, so a ticket opens one stream.
  ticketInsert: `WITH expired AS (DELETE FROM event_tickets WHERE expires_at <= ${DB_NOW_MS})
    INSERT INTO event_tickets (hash, token_id, subject, scopes, expires_at, credential_expires_at)
    VALUES ($1, $2, $3, $4, ${DB_NOW_MS} + $5::bigint, $6) RETURNING expires_at`,
  ticketSpend: `DELETE FROM event_tickets WHERE hash = $1 AND expires_at > ${DB_NOW_MS} RETURNING *`,
} as const;

/**
 * The statements that may be sent again after a failover cut them off mid-way (throughFailover):
 * reads, an insert that skips the ids it finds (its answer then reads them back), a revocation
 * that keeps its first time. A delete is sent again by its caller, which knows what a second
 * "nothing to delete" means; a token's or a ticket's insert is not (a second one would conflict).
 */
const REPEATABLE: ReadonlySet<keyof typeof STATEMENTS> = new Set([
  'listAll',
  'listTag',
  'listOwner',
  'listOwnerTag',
  'insertBatch',
  'byIds',
  'tokenById',
  'tokenPage',
  'tokenPageOfSubject',
  'tokenRevoke',
] as const);

/**
 * One named, prepared statement: parsed once per connection. With more than one server, sent
 * again through a failover (postgres/hosts.ts) while that is safe, for up to DATABASE_FAILOVER_WAIT.
 */
export async function runStatement<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  name: keyof typeof STATEMENTS,
  values: unknown[],
  repeatable = REPEATABLE.has(name),
): Promise<pg.QueryResult<R>> {
  try {
    return await throughFailover(routerOf(pool), repeatable, () =>
      pool.query<R>({ name, text: STATEMENTS[name], values }),
    );
  } catch (error) {
    throw classifyPostgresError(error);
  }
}
