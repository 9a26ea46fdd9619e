import pg from 'pg';
import { Batcher, Coalescer, failed } from './batcher.js';
import { classifyPostgresError, inTransaction } from './postgres-errors.js';
import { EventListener, PostgresEvents } from './postgres-events.js';
import { readBacklog } from './postgres-backlog.js';
import { PostgresWebhooks } from './postgres-webhooks.js';
import { STATEMENTS } from './postgres-statements.js';
import { createdPayload } from './event-payload.js';
import { postgresMigrations } from './migrations/postgres.js';
import {
  type AttemptOutcome,
  type AttemptRecord,
  type AttemptRecorded,
  type BatchResult,
  type NewWebhookRecord,
  type WebhookPatch,
  type ClaimedDelivery,
  type CreateResult,
  type DeliveryRecord,
  type EventRecord,
  type EventRow,
  type EventType,
  type PlantPage,
  type PlantRecord,
  type Store,
  StoreUnavailableError,
  type TokenRecord,
  type WebhookRecord,
  type WebhookBacklog,
  FAN_OUT_BATCH,
  FIRST_ID,
  LAST_ID,
  samePlant,
} from './store.js';

interface PlantRow {
  id: string;
  owner: string;
  name: string;
  tag: string | null;
}

interface TokenRow {
  id: string;
  secret_hash: Buffer;
  subject: string;
  scopes: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  read_at?: string;
}

const optionalNumber = (value: string | null): number | null => (value === null ? null : Number(value));

// BIGINT arrives as text and becomes a bigint here, exactly.
const toPlant = (row: PlantRow): PlantRecord => ({
  id: BigInt(row.id),
  owner: row.owner,
  name: row.name,
  tag: row.tag,
});

const toToken = (row: TokenRow): TokenRecord => ({
  id: row.id,
  secretHash: row.secret_hash,
  subject: row.subject,
  scopes: row.scopes.split(' '),
  createdAt: Number(row.created_at),
  expiresAt: optionalNumber(row.expires_at),
  revokedAt: optionalNumber(row.revoked_at),
  ...(row.read_at !== undefined && { readAt: Number(row.read_at) }),
});

// Serialises migrations of every instance that starts at once (an arbitrary, fixed lock key).
const MIGRATION_LOCK = 7_316_001;

/** How long a query may wait for a connection before the request fails (503, retryable). */
const CONNECT_TIMEOUT_MS = 3000;

export interface PostgresOptions {
  /** Connections per process. */
  readonly poolSize?: number;
  /** Called when an idle connection fails (the server went away); the pool replaces it. */
  readonly onIdleError?: (error: Error) => void;
}

export function openPostgres(url: string, options: PostgresOptions = {}): PostgresStore {
  // The dispatcher's pool (see PostgresEvents) opens only when a dispatcher first claims.
  return new PostgresStore(createPool(url, options), () =>
    createPool(url, { ...options, poolSize: DISPATCH_POOL_SIZE, asyncCommit: true }),
  );
}

/** The URL with a server setting added to its `options` parameter (kept with any already there). */
function withServerOption(url: string, option: string): string {
  const parsed = new URL(url);
  const given = parsed.searchParams.get('options');
  parsed.searchParams.set('options', given === null ? option : `${given} ${option}`);
  return parsed.toString();
}

/** Connections of the webhook dispatcher's pool, per process. */
const DISPATCH_POOL_SIZE = 4;

export function createPool(url: string, options: PostgresOptions & { readonly asyncCommit?: boolean } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.asyncCommit === true ? withServerOption(url, '-c synchronous_commit=off') : url,
    max: options.poolSize ?? 10,
    // Fail fast when the server is unreachable, so callers get a 503 instead of a hang.
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: 15_000,
    idleTimeoutMillis: 30_000,
  });
  // Without a listener an idle connection's error (a server restart) would crash the process.
  pool.on('error', options.onIdleError ?? (() => {}));
  return pool;
}

/** The most creates one INSERT carries. */
const MAX_BATCH = 500;
/**
 * Create batches in flight at once: one being committed while the next is sent. Measured with
 * `npm run bench` against 1, 2, 4 and 10: 2 was fastest (docs: BENCHMARKS.md).
 */
const WRITE_SLOTS = 2;

/**
 * Plants in id order. Two INSERTs that share ids (two instances' batches, an import) then meet
 * them in the same order: one waits for the other instead of each holding a row the other needs
 * (a deadlock, which PostgreSQL breaks after a second by failing one of them).
 */
const inIdOrder = (plants: PlantRecord[]): PlantRecord[] =>
  plants.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

/** The first plant of each id, by id: the one a batch offers; the others are answered against it. */
function firstOfEachId(plants: Iterable<PlantRecord>): Map<bigint, PlantRecord> {
  const first = new Map<bigint, PlantRecord>();
  for (const plant of plants) if (!first.has(plant.id)) first.set(plant.id, plant);
  return first;
}

interface DeleteRequest {
  readonly id: bigint;
  /** Only this owner's plant; null for any (plants:admin). */
  readonly owner: string | null;
}

/** The insertBatch statement's parameters: one array per column. */
const columns = (plants: readonly PlantRecord[]): unknown[] => [
  plants.map((p) => p.id),
  plants.map((p) => p.owner),
  plants.map((p) => p.name),
  plants.map((p) => p.tag),
  plants.map(createdPayload),
];

const pageKey = ({ owner, tag, fromId, limit }: PlantPage): string =>
  JSON.stringify([owner, tag, String(fromId), limit]);

export class PostgresStore implements Store {
  readonly engine = 'postgres' as const;
  /** Reads of one page share a query, never one that started before they arrived. */
  private readonly reads = new Coalescer<PlantRecord[]>();
  /** Creates that wait for a connection together are one INSERT: one round trip, one commit. */
  private readonly creates: Batcher<PlantRecord, CreateResult>;

  /** Deletes that wait together are one DELETE, as creates are (see deletePlants). */
  private readonly deletes: Batcher<DeleteRequest, boolean>;
  private readonly events: PostgresEvents;
  private readonly webhooks: PostgresWebhooks;
  private listener: EventListener | undefined;
  private readonly watchers = new Set<() => void>();

  private dispatchPool: pg.Pool | undefined;

  constructor(
    private readonly pool: pg.Pool,
    openDispatchPool?: () => pg.Pool,
  ) {
    this.webhooks = new PostgresWebhooks(pool);
    this.events = new PostgresEvents(
      pool,
      openDispatchPool === undefined ? undefined : () => (this.dispatchPool ??= openDispatchPool()),
    );
    this.deletes = new Batcher(
      WRITE_SLOTS,
      MAX_BATCH,
      (items) => this.deletePlants(items),
      CONNECT_TIMEOUT_MS,
      (sent) =>
        new StoreUnavailableError(
          sent
            ? 'the database did not answer a sent delete in time: it may be done (a retry answers 404 then)'
            : 'the database is not keeping up: a delete waited too long for it',
        ),
    );
    this.creates = new Batcher(
      WRITE_SLOTS,
      MAX_BATCH,
      (plants) => this.insertPlants(plants),
      // Each create's deadline, from its arrival: as long as a query may wait for a connection.
      CONNECT_TIMEOUT_MS,
      (sent) =>
        new StoreUnavailableError(
          sent
            ? 'the database did not answer a sent create in time: it may still be stored (an identical retry is safe)'
            : 'the database is not keeping up: a create waited too long for it',
        ),
    );
  }

  /** One named, prepared statement: parsed once per connection. */
  private async run<R extends pg.QueryResultRow>(
    name: keyof typeof STATEMENTS,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>({ name, text: STATEMENTS[name], values });
    } catch (error) {
      throw classifyPostgresError(error);
    }
  }

  migrate(): Promise<number[]> {
    return this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
      );
      const done = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
      );
      const applied: number[] = [];
      for (const m of postgresMigrations) {
        if (done.has(m.version)) continue;
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
        applied.push(m.version);
      }
      return applied;
    });
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    return this.creates.submit(plant);
  }

  /**
   * One autocommitted INSERT for a batch of creates, then one read of the plants that held the ids
   * it skipped. Only the first plant of each id is offered; the others are answered against it.
   * Each create is answered on its own: one stored by the INSERT gets its answer even if the read
   * after it fails.
   */
  private async insertPlants(plants: readonly PlantRecord[]): Promise<Array<CreateResult | Promise<CreateResult>>> {
    const results: Array<CreateResult | Promise<CreateResult>> = [];
    let pending = plants.map((_, i) => i);
    try {
      while (pending.length > 0) {
        const offered = firstOfEachId(pending.map((i) => plants[i]!));
        const batch = inIdOrder([...offered.values()]);
        const stored = new Set(
          (await this.run<{ id: string }>('insertBatch', columns(batch))).rows.map((row) => BigInt(row.id)),
        );
        const skipped: number[] = [];
        for (const i of pending) {
          const winner = offered.get(plants[i]!.id)!;
          if (!stored.has(winner.id)) skipped.push(i);
          else results[i] = winner === plants[i] ? { created: true } : { created: false, existing: winner };
        }
        pending = [];
        if (skipped.length === 0) break;
        const holders = new Map<bigint, PlantRecord>();
        const held = batch.filter((p) => !stored.has(p.id)).map((p) => p.id);
        for (const row of (await this.run<PlantRow>('byIds', [held])).rows) holders.set(BigInt(row.id), toPlant(row));
        for (const i of skipped) {
          const holder = holders.get(plants[i]!.id);
          if (holder === undefined)
            pending.push(i); // the holder was deleted in between: insert again
          else results[i] = { created: false, existing: holder };
        }
      }
    } catch (error) {
      for (let i = 0; i < plants.length; i++) results[i] ??= failed(error);
    }
    return results;
  }

  listPlants(page: PlantPage): Promise<PlantRecord[]> {
    return this.reads.read(pageKey(page), () => this.queryPage(page));
  }

  private async queryPage({ owner, tag, fromId, limit }: PlantPage): Promise<PlantRecord[]> {
    const result =
      owner === null
        ? tag === null
          ? await this.run<PlantRow>('listAll', [fromId, limit])
          : await this.run<PlantRow>('listTag', [tag, fromId, limit])
        : tag === null
          ? await this.run<PlantRow>('listOwner', [owner, fromId, limit])
          : await this.run<PlantRow>('listOwnerTag', [owner, tag, fromId, limit]);
    return result.rows.map(toPlant);
  }

  /**
   * One REPEATABLE READ, READ ONLY transaction on a connection of its own: every page is read from
   * the snapshot its first query took, and writers are not blocked meanwhile (MVCC). Keyset pages,
   * so only one page is held in memory.
   */
  async *snapshotPlants(pageSize: number): AsyncGenerator<readonly PlantRecord[]> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw classifyPostgresError(error);
    }
    let open = false;
    let broken = false;
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      open = true;
      let fromId = FIRST_ID;
      for (;;) {
        const { rows } = await client.query<PlantRow>({
          name: 'listAll',
          text: STATEMENTS.listAll,
          values: [fromId, pageSize],
        });
        const page = rows.map(toPlant);
        if (page.length > 0) yield page;
        const last = page.at(-1);
        if (page.length < pageSize || last === undefined || last.id === LAST_ID) break;
        fromId = last.id + 1n;
      }
      await client.query('COMMIT');
      open = false;
    } catch (error) {
      throw classifyPostgresError(error);
    } finally {
      // Failed, or the reader stopped early: the transaction ends before the connection goes back.
      if (open) await client.query('ROLLBACK').catch(() => void (broken = true));
      client.release(broken);
    }
  }

  /** One transaction: the insert, and the read of the plants that already held the other ids. */
  async insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult> {
    // Only the first plant of each id is offered; every other is compared with the id's holder.
    const first = firstOfEachId(plants);
    const offered = inIdOrder([...first.values()]);
    const { insertedIds, holders } = await this.transaction(async (client) => {
      const inserted = await client.query<{ id: string }>({
        name: 'insertBatch',
        text: STATEMENTS.insertBatch,
        values: columns(offered),
      });
      const ids = new Set(inserted.rows.map((r) => BigInt(r.id)));
      const found = new Map<bigint, PlantRecord>();
      const skipped = offered.filter((p) => !ids.has(p.id)).map((p) => p.id);
      if (skipped.length > 0) {
        const rows = await client.query<PlantRow>({ name: 'byIds', text: STATEMENTS.byIds, values: [skipped] });
        for (const row of rows.rows) found.set(BigInt(row.id), toPlant(row));
      }
      return { insertedIds: ids, holders: found };
    });
    let unchanged = 0;
    const conflicts: PlantRecord[] = [];
    for (const plant of plants) {
      const key = plant.id;
      if (insertedIds.has(key) && first.get(key) === plant) continue; // this one was stored
      const holder = insertedIds.has(key) ? first.get(key) : holders.get(key);
      if (holder !== undefined && samePlant(holder, plant)) unchanged += 1;
      else conflicts.push(plant);
    }
    return { inserted: insertedIds.size, unchanged, conflicts };
  }

  private transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, work);
  }

  deletePlant(id: bigint, owner: string | null): Promise<boolean> {
    return this.deletes.submit({ id, owner });
  }

  /**
   * One statement for a batch of deletes, as for creates: events commit in id order under one lock
   * (postgres-statements.ts), so deletes sent one by one would each wait for the others' commits.
   * The first delete of each id is offered; a later one of the same id goes in the next statement,
   * and so sees the first one's outcome, as it would have one after the other.
   */
  private async deletePlants(items: readonly DeleteRequest[]): Promise<boolean[]> {
    const results: boolean[] = [];
    let pending = items.map((_, i) => i);
    while (pending.length > 0) {
      const offered = new Map<bigint, number>();
      const later: number[] = [];
      for (const i of pending) {
        if (offered.has(items[i]!.id)) later.push(i);
        else offered.set(items[i]!.id, i);
      }
      const batch = [...offered.values()].sort((a, b) => (items[a]!.id < items[b]!.id ? -1 : 1));
      const gone = new Set(
        (
          await this.run<{ id: string }>('deleteBatch', [
            batch.map((i) => items[i]!.id),
            batch.map((i) => items[i]!.owner),
          ])
        ).rows.map((row) => BigInt(row.id)),
      );
      for (const i of batch) results[i] = gone.has(items[i]!.id);
      pending = later;
    }
    return results;
  }

  /** Stamped with the database's clock: the lifetime asked for is kept, the issuing host's time is not. */
  async createToken(t: TokenRecord): Promise<void> {
    const lifetime = t.expiresAt === null ? null : t.expiresAt - t.createdAt;
    await this.run('tokenInsert', [t.id, t.secretHash, t.subject, t.scopes.join(' '), lifetime]);
  }

  async findToken(id: string): Promise<TokenRecord | undefined> {
    const row = (await this.run<TokenRow>('tokenById', [id])).rows[0];
    return row && toToken(row);
  }

  async listTokens(): Promise<TokenRecord[]> {
    return (await this.run<TokenRow>('tokenAll', [])).rows.map(toToken);
  }

  /** Stamped with the database's clock; `at` (the calling host's) is not trusted. */
  async revokeToken(id: string, _at: number): Promise<boolean> {
    return (await this.run('tokenRevoke', [id])).rowCount === 1;
  }

  // Events, webhooks and deliveries (postgres-events.ts).

  readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<EventRecord[]> {
    return this.events.readEvents(after, owner, limit, types);
  }

  readEventRows(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<readonly EventRow[]> {
    return this.events.readEventRows(after, owner, limit, types);
  }

  eventHorizon(): Promise<bigint> {
    return this.events.eventHorizon();
  }

  lastEventId(): Promise<bigint> {
    return this.events.lastEventId();
  }

  pruneEvents(retentionMs: number, batch: number): Promise<number> {
    return this.events.prune(retentionMs, batch);
  }

  /** LISTEN/NOTIFY on a connection of its own, opened while anyone watches: commits of every instance. */
  watchEvents(listener: () => void): () => void {
    this.watchers.add(listener);
    this.listener ??= new EventListener(this.pool.options.connectionString ?? '', () => {
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

  createWebhook(webhook: NewWebhookRecord, max: number): Promise<boolean> {
    return this.events.createWebhook(webhook, max);
  }

  listWebhooks(owner: string | null): Promise<WebhookRecord[]> {
    return this.events.listWebhooks(owner);
  }

  deleteWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.events.deleteWebhook(id, owner);
  }

  enableWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.events.enableWebhook(id, owner);
  }

  updateWebhook(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): Promise<{ webhook: WebhookRecord; disabled: boolean } | undefined> {
    return this.webhooks.update(id, owner, patch);
  }

  rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): Promise<WebhookRecord | undefined> {
    return this.webhooks.rotateSecret(id, owner, secret, previousUntil);
  }

  pingWebhook(id: string, owner: string | null): Promise<DeliveryRecord | undefined> {
    return this.webhooks.ping(id, owner);
  }

  recoverDeliveries(id: string, owner: string | null, since: number): Promise<number | undefined> {
    return this.webhooks.recover(id, owner, since);
  }

  listAttempts(webhookId: string, deliveryId: bigint, owner: string | null): Promise<AttemptRecord[] | undefined> {
    return this.webhooks.attempts(webhookId, deliveryId, owner);
  }

  listDeliveries(webhookId: string, owner: string | null, limit: number): Promise<DeliveryRecord[] | undefined> {
    return this.events.listDeliveries(webhookId, owner, limit);
  }

  retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean> {
    return this.events.retryDelivery(webhookId, deliveryId, owner);
  }

  claimDeliveries(
    holder: string,
    leaseMs: number,
    limit: number,
    perWebhook: number,
    busy: ReadonlyMap<string, number>,
    fanOut = FAN_OUT_BATCH,
  ): Promise<ClaimedDelivery[]> {
    return this.events.claim(holder, leaseMs, limit, perWebhook, busy, fanOut);
  }

  recordAttempt(id: bigint, holder: string, outcome: AttemptOutcome): Promise<AttemptRecorded> {
    return this.events.recordAttempt(id, holder, outcome);
  }

  releaseLeases(holder: string): Promise<void> {
    return this.events.releaseLeases(holder);
  }

  nextDueInMs(): Promise<number | null> {
    return this.events.nextDueInMs();
  }

  webhookBacklog(): Promise<WebhookBacklog> {
    return readBacklog(this.pool);
  }

  async durabilityWarnings(): Promise<string[]> {
    const warnings: string[] = [];
    const setting = async (name: 'fsync' | 'synchronous_commit'): Promise<string> => {
      try {
        return (await this.pool.query<Record<string, string>>(`SHOW ${name}`)).rows[0]?.[name] ?? '';
      } catch (error) {
        throw classifyPostgresError(error);
      }
    };
    if ((await setting('fsync')) === 'off')
      warnings.push('PostgreSQL runs with fsync=off: a crash can lose committed plants');
    if ((await setting('synchronous_commit')) === 'off') {
      warnings.push('PostgreSQL runs with synchronous_commit=off: a crash can lose plants already answered 200');
    }
    return warnings;
  }

  async countPlants(): Promise<number> {
    const { rows } = await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM plants');
    return Number(rows[0]!.n);
  }

  async isReady(): Promise<boolean> {
    try {
      await this.pool.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.watchers.clear();
    await this.listener?.close();
    this.listener = undefined;
    if (!this.pool.ended) await this.pool.end();
    if (this.dispatchPool !== undefined && !this.dispatchPool.ended) await this.dispatchPool.end();
  }
}
