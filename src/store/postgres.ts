import pg from 'pg';
import { Batcher, Coalescer, failed } from './batcher.js';
import { classifyPostgresError } from './postgres-errors.js';
import { STATEMENTS } from './postgres-statements.js';
import { postgresMigrations } from './migrations/postgres.js';
import {
  type BatchResult,
  type CreateResult,
  type PlantPage,
  type PlantRecord,
  type Store,
  StoreUnavailableError,
  type TokenRecord,
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
  return new PostgresStore(createPool(url, options));
}

export function createPool(url: string, options: PostgresOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
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

/** The insertBatch statement's parameters: one array per column. */
const columns = (plants: readonly PlantRecord[]): unknown[] => [
  plants.map((p) => p.id),
  plants.map((p) => p.owner),
  plants.map((p) => p.name),
  plants.map((p) => p.tag),
];

const pageKey = ({ owner, tag, fromId, limit }: PlantPage): string =>
  JSON.stringify([owner, tag, String(fromId), limit]);

export class PostgresStore implements Store {
  readonly engine = 'postgres' as const;
  /** Reads of one page share a query, never one that started before they arrived. */
  private readonly reads = new Coalescer<PlantRecord[]>();
  /** Creates that wait for a connection together are one INSERT: one round trip, one commit. */
  private readonly creates: Batcher<PlantRecord, CreateResult>;

  constructor(private readonly pool: pg.Pool) {
    this.creates = new Batcher(
      WRITE_SLOTS,
      MAX_BATCH,
      (plants) => this.insertPlants(plants),
      CONNECT_TIMEOUT_MS, // as long as a query may wait for a connection of the pool
      () => new StoreUnavailableError('the database is not keeping up: a create waited too long for it'),
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

  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw classifyPostgresError(error);
    }
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw classifyPostgresError(error);
    } finally {
      client.release();
    }
  }

  async deletePlant(id: bigint, owner: string | null): Promise<boolean> {
    const result = owner === null ? await this.run('delete', [id]) : await this.run('deleteOwn', [id, owner]);
    return result.rowCount === 1;
  }

  async createToken(t: TokenRecord): Promise<void> {
    await this.run('tokenInsert', [
      t.id,
      t.secretHash,
      t.subject,
      t.scopes.join(' '),
      t.createdAt,
      t.expiresAt,
      t.revokedAt,
    ]);
  }

  async findToken(id: string): Promise<TokenRecord | undefined> {
    const row = (await this.run<TokenRow>('tokenById', [id])).rows[0];
    return row && toToken(row);
  }

  async listTokens(): Promise<TokenRecord[]> {
    return (await this.run<TokenRow>('tokenAll', [])).rows.map(toToken);
  }

  async revokeToken(id: string, at: number): Promise<boolean> {
    return (await this.run('tokenRevoke', [at, id])).rowCount === 1;
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
    if (!this.pool.ended) await this.pool.end();
  }
}
