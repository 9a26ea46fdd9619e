import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { TurnBatch } from './batcher.js';
import { GroupCommit } from './group-commit.js';
import { sqliteMigrations } from './migrations/sqlite.js';
import { PageCache } from './page-cache.js';
import {
  type BatchResult,
  type CreateResult,
  type PlantPage,
  type PlantRecord,
  type Store,
  type TokenRecord,
  samePlant,
} from './store.js';

interface PlantRow {
  id: bigint;
  owner: string;
  name: string;
  tag: string | null;
}

interface TokenRow {
  id: string;
  secret_hash: Buffer;
  subject: string;
  scopes: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

const toToken = (row: TokenRow): TokenRecord => ({
  id: row.id,
  secretHash: row.secret_hash,
  subject: row.subject,
  scopes: row.scopes.split(' '),
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  revokedAt: row.revoked_at,
});

/** Opens (creating when missing) a SQLite store with the durability the contract needs. */
export function openSqlite(path: string): SqliteStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  db.pragma('busy_timeout = 5000');
  if (path !== ':memory:') {
    db.pragma('journal_mode = WAL');
    if (db.pragma('journal_mode', { simple: true }) !== 'wal') throw new Error(`could not put ${path} in WAL mode`);
  }
  // FULL: in WAL mode every commit is fsynced before it returns, so a 200 survives power loss.
  db.pragma('synchronous = FULL');
  if (db.pragma('synchronous', { simple: true }) !== 2) throw new Error('could not set synchronous=FULL');
  return new SqliteStore(db);
}

export class SqliteStore implements Store {
  readonly engine = 'sqlite' as const;
  private statements: ReturnType<SqliteStore['prepare']> | undefined;

  private readonly writes: GroupCommit;
  /** The reads of one turn: one check of data_version for all of them, then one lookup each. */
  private readonly reads = new TurnBatch<PlantPage, readonly PlantRecord[]>((pages) => this.readPages(pages));
  /** At most this many cached rows: a few megabytes. */
  private readonly pages = new PageCache<PlantRow>(50_000);

  constructor(private readonly db: Database.Database) {
    this.writes = new GroupCommit(db);
  }

  // Prepared once, after migrations created the tables.
  private prepare() {
    const db = this.db;
    const plants = (sql: string) => db.prepare(sql).safeIntegers(true);
    const list = (where: string) =>
      plants(`SELECT id, owner, name, tag FROM plants WHERE ${where} id >= ? ORDER BY id LIMIT ?`);
    return {
      insert: plants('INSERT INTO plants (id, owner, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING'),
      byId: plants('SELECT id, owner, name, tag FROM plants WHERE id = ?'),
      listAll: list(''),
      listTag: list('tag = ? AND'),
      listOwner: list('owner = ? AND'),
      listOwnerTag: list('owner = ? AND tag = ? AND'),
      delete: plants('DELETE FROM plants WHERE id = ?'),
      deleteOwn: plants('DELETE FROM plants WHERE id = ? AND owner = ?'),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      count: db.prepare('SELECT count(*) FROM plants').pluck(),
      tokenInsert: db.prepare(
        'INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      tokenById: db.prepare('SELECT * FROM api_tokens WHERE id = ?'),
      tokenAll: db.prepare('SELECT * FROM api_tokens ORDER BY created_at, id'),
      tokenRevoke: db.prepare('UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?'),
    };
  }

  private get sql() {
    this.statements ??= this.prepare();
    return this.statements;
  }

  migrate(): Promise<number[]> {
    const db = this.db;
    db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
    );
    const applied: number[] = [];
    // IMMEDIATE takes the write lock first, so two processes migrating at once apply each step once.
    const step = db.transaction((m: (typeof sqliteMigrations)[number]) => {
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version)) return;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      applied.push(m.version);
    });
    for (const m of sqliteMigrations) step.immediate(m);
    return Promise.resolve(applied);
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    const { insert, byId } = this.sql;
    // Inside one transaction the holder cannot vanish between the two statements.
    return this.writes.run((): CreateResult => {
      if (insert.run(plant.id, plant.owner, plant.name, plant.tag).changes === 1) {
        this.pages.invalidate(plant.owner);
        return { created: true };
      }
      return { created: false, existing: byId.get(plant.id) as PlantRow };
    });
  }

  listPlants(page: PlantPage): Promise<readonly PlantRecord[]> {
    return this.reads.submit(page);
  }

  private readPages(pages: readonly PlantPage[]): Array<readonly PlantRecord[]> {
    this.pages.check(this.sql.dataVersion.get()); // another connection committed: every page may be stale
    return pages.map((page) => this.readPage(page));
  }

  private readPage({ owner, tag, fromId, limit }: PlantPage): readonly PlantRecord[] {
    const s = this.sql;
    const key = tag === null ? `${fromId}:${limit}` : `${fromId}:${limit}:${tag}`;
    const cached = this.pages.get(owner, key);
    if (cached) return cached;
    const rows = (
      owner === null
        ? tag === null
          ? s.listAll.all(fromId, limit)
          : s.listTag.all(tag, fromId, limit)
        : tag === null
          ? s.listOwner.all(owner, fromId, limit)
          : s.listOwnerTag.all(owner, tag, fromId, limit)
    ) as PlantRow[];
    this.pages.set(owner, key, rows);
    return rows;
  }

  insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult> {
    return Promise.resolve(this.batch(plants));
  }

  // One IMMEDIATE transaction: a single fsync for the whole batch.
  private readonly batch = (plants: readonly PlantRecord[]): BatchResult => {
    const { insert, byId } = this.sql;
    let inserted = 0;
    let unchanged = 0;
    const conflicts: PlantRecord[] = [];
    this.db
      .transaction(() => {
        for (const plant of plants) {
          if (insert.run(plant.id, plant.owner, plant.name, plant.tag).changes === 1) inserted += 1;
          else if (samePlant(byId.get(plant.id) as PlantRow, plant)) unchanged += 1;
          else conflicts.push(plant);
        }
      })
      .immediate();
    if (inserted > 0) this.pages.clear();
    return { inserted, unchanged, conflicts };
  };

  deletePlant(id: bigint, owner: string | null): Promise<boolean> {
    const { delete: remove, deleteOwn } = this.sql;
    return this.writes.run(() => {
      if ((owner === null ? remove.run(id) : deleteOwn.run(id, owner)).changes === 0) return false;
      this.pages.invalidate(owner); // null: an admin's delete, whose owner is not known here
      return true;
    });
  }

  createToken(t: TokenRecord): Promise<void> {
    this.sql.tokenInsert.run(t.id, t.secretHash, t.subject, t.scopes.join(' '), t.createdAt, t.expiresAt, t.revokedAt);
    return Promise.resolve();
  }

  findToken(id: string): Promise<TokenRecord | undefined> {
    const row = this.sql.tokenById.get(id) as TokenRow | undefined;
    return Promise.resolve(row && toToken(row));
  }

  listTokens(): Promise<TokenRecord[]> {
    return Promise.resolve((this.sql.tokenAll.all() as TokenRow[]).map(toToken));
  }

  revokeToken(id: string, at: number): Promise<boolean> {
    return Promise.resolve(this.sql.tokenRevoke.run(at, id).changes === 1);
  }

  durabilityWarnings(): Promise<string[]> {
    return Promise.resolve([]); // WAL and synchronous=FULL are set and checked when the file is opened
  }

  countPlants(): Promise<number> {
    return Promise.resolve(this.sql.count.get() as number);
  }

  isReady(): Promise<boolean> {
    try {
      this.db.prepare('SELECT 1').get();
      return Promise.resolve(true);
    } catch {
      return Promise.resolve(false);
    }
  }

  close(): Promise<void> {
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}
