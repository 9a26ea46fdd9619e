import pg from 'pg';
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

// SQLSTATE classes that mean "the database cannot serve now", not "this query is wrong":
// 08 connection exception, 53 insufficient resources, 57P operator intervention (shutdown, restart).
const UNAVAILABLE = /^(08|53|57P)/;

/** Errors of reaching the database become StoreUnavailableError (a 503); query errors stay what they are. */
function unavailable(error: unknown): unknown {
  if (error instanceof pg.DatabaseError) {
    return UNAVAILABLE.test(error.code ?? '') ? new StoreUnavailableError(error.message, { cause: error }) : error;
  }
  // Anything else from the driver is the connection failing: refused, reset, timed out, terminated.
  if (error instanceof TypeError || error instanceof RangeError) return error;
  return new StoreUnavailableError(error instanceof Error ? error.message : String(error), { cause: error });
}

// pg reads BIGINT as text, never as a JS number. (A cast here, `id::text`, would make ORDER BY id
// sort the text: output column names win in ORDER BY.)
const SELECT_PLANT = 'SELECT id, owner, name, tag FROM plants';
/** Plants in id order from $n+1, at most $n+2 of them, filtered by equality on `columns` ($1…$n). */
function list(columns: string[]): string {
  const where = columns.map((column, i) => `${column} = $${i + 1} AND `).join('');
  return `${SELECT_PLANT} WHERE ${where}id >= $${columns.length + 1} ORDER BY id LIMIT $${columns.length + 2}`;
}

const STATEMENTS = {
  insert: 'INSERT INTO plants (id, owner, name, tag) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING',
  byId: `${SELECT_PLANT} WHERE id = $1`,
  listAll: list([]),
  listTag: list(['tag']),
  listOwner: list(['owner']),
  listOwnerTag: list(['owner', 'tag']),
  delete: 'DELETE FROM plants WHERE id = $1',
  deleteOwn: 'DELETE FROM plants WHERE id = $1 AND owner = $2',
  // One statement for a batch: atomic, and rows with ids already held are skipped, not overwritten.
  insertBatch: `INSERT INTO plants (id, owner, name, tag)
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])
    ON CONFLICT (id) DO NOTHING RETURNING id`,
  byIds: `${SELECT_PLANT} WHERE id = ANY($1::bigint[])`,
  tokenInsert:
    'INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
  tokenById: 'SELECT * FROM api_tokens WHERE id = $1',
  tokenAll: 'SELECT * FROM api_tokens ORDER BY created_at, id',
  tokenRevoke: 'UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2',
} as const;

// Serialises migrations of every instance that starts at once (an arbitrary, fixed lock key).
const MIGRATION_LOCK = 7_316_001;

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
    connectionTimeoutMillis: 3000,
    query_timeout: 15_000,
    idleTimeoutMillis: 30_000,
  });
  // Without a listener an idle connection's error (a server restart) would crash the process.
  pool.on('error', options.onIdleError ?? (() => {}));
  return pool;
}

export class PostgresStore implements Store {
  readonly engine = 'postgres' as const;

  constructor(private readonly pool: pg.Pool) {}

  /** One named, prepared statement: parsed once per connection. */
  private async run<R extends pg.QueryResultRow>(
    name: keyof typeof STATEMENTS,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    try {
      return await this.pool.query<R>({ name, text: STATEMENTS[name], values });
    } catch (error) {
      throw unavailable(error);
    }
  }

  async migrate(): Promise<number[]> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw unavailable(error);
    }
    const applied: number[] = [];
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)',
      );
      const done = new Set(
        (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
      );
      for (const m of postgresMigrations) {
        if (done.has(m.version)) continue;
        await client.query(m.sql);
        await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
        applied.push(m.version);
      }
      await client.query('COMMIT');
      return applied;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw unavailable(error);
    } finally {
      client.release();
    }
  }

  async createPlant(plant: PlantRecord): Promise<CreateResult> {
    for (;;) {
      const inserted = await this.run('insert', [plant.id, plant.owner, plant.name, plant.tag]);
      if (inserted.rowCount === 1) return { created: true };
      // The holder may be deleted between the two statements: then insert again.
      const existing = (await this.run<PlantRow>('byId', [plant.id])).rows[0];
      if (existing) return { created: false, existing: toPlant(existing) };
    }
  }

  async listPlants({ owner, tag, fromId, limit }: PlantPage): Promise<PlantRecord[]> {
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

  async insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult> {
    const columns = [
      plants.map((p) => p.id),
      plants.map((p) => p.owner),
      plants.map((p) => p.name),
      plants.map((p) => p.tag),
    ];
    const insertedIds = new Set((await this.run<{ id: string }>('insertBatch', columns)).rows.map((r) => r.id));
    // The first plant of an inserted id is the one stored; every other plant is compared with its holder.
    const holders = new Map<string, PlantRecord>();
    const rest: PlantRecord[] = [];
    for (const plant of plants) {
      const key = String(plant.id);
      if (insertedIds.has(key) && !holders.has(key)) holders.set(key, plant);
      else rest.push(plant);
    }
    const unknown = rest.filter((p) => !holders.has(String(p.id))).map((p) => p.id);
    if (unknown.length > 0) {
      for (const row of (await this.run<PlantRow>('byIds', [unknown])).rows) holders.set(row.id, toPlant(row));
    }
    const conflicts = rest.filter((p) => {
      const holder = holders.get(String(p.id));
      return holder === undefined || !samePlant(holder, p);
    });
    return { inserted: insertedIds.size, unchanged: rest.length - conflicts.length, conflicts };
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
        throw unavailable(error);
      }
    };
    if ((await setting('fsync')) === 'off')
      warnings.push('PostgreSQL runs with fsync=off: a crash can lose committed plants');
    if ((await setting('synchronous_commit')) === 'off') {
      warnings.push('PostgreSQL runs with synchronous_commit=off: a crash can lose plants already answered 200');
    }
    return warnings;
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
