import type Database from 'better-sqlite3';
import { createdPayload, deletedPayload } from '../event-payload.js';
import { PageCache } from './page-cache.js';
import type { SqliteEventLog } from './event-log.js';
import { snapshotPages } from './snapshot.js';
import {
  type BatchResult,
  type CreateResult,
  FIRST_ID,
  type PlantPage,
  type PlantRecord,
  samePlant,
} from '../store.js';

// Plants on SQLite: each create and delete writes its event in the same transaction (the caller's
// group commit, SqliteStore); pages are read through a cache that one check of data_version keeps
// true to other connections' commits; imports come in batches; an export reads a snapshot.

interface PlantRow {
  id: bigint;
  owner: string;
  name: string;
  tag: string | null;
}

// Prepared once, after migrations created the tables.
export function preparePlantStatements(db: Database.Database) {
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
    delete: plants('DELETE FROM plants WHERE id = ? RETURNING owner').pluck(),
    deleteOwn: plants('DELETE FROM plants WHERE id = ? AND owner = ? RETURNING owner').pluck(),
    dataVersion: db.prepare('PRAGMA data_version').pluck(),
    // Kept by migration 10's triggers: no count of every plant.
    count: db.prepare('SELECT n FROM plant_count').pluck(),
  };
}

type Statements = ReturnType<typeof preparePlantStatements>;

/**
 * The page cache of an importing connection, in KiB (better-sqlite3's default is 16 MiB). Each
 * plant adds to four indexes at places spread over every owner and tag, and a batch of 50,000
 * dirties about 10,000 pages (40 MiB) at a million plants, more as the trees deepen: in 16 MiB
 * those pages are spilled to the WAL mid-batch and read back, 1.03 reads and 3.9 kB written a
 * plant at a million, 3.42 and 11.8 kB at ten million; with 128 MiB 0.21 and 1.7 kB, 0.27 and
 * 2.2 kB (BENCHMARKS.md, "Plants: 1,000,000 and 10,000,000"). The import's peak RSS is
 * about 130 MiB larger, whatever the size. Only for the import: `serve` keeps the default.
 */
const IMPORT_CACHE_KIB = 128 * 1024;

export class SqlitePlants {
  /** At most this many cached rows: a few megabytes. */
  private readonly pages = new PageCache<PlantRow>(50_000);

  /** `eventsWritten`: called after a create or a delete wrote its event (the watchers' wake-up). */
  constructor(
    private readonly db: Database.Database,
    private readonly sql: Statements,
    private readonly log: SqliteEventLog,
    private readonly eventsWritten: () => void,
  ) {}

  /**
   * Inside the caller's transaction, in which the holder cannot vanish between the two statements,
   * and the event commits with the plant or not at all.
   */
  create(plant: PlantRecord): CreateResult {
    const { insert, byId } = this.sql;
    if (insert.run(plant.id, plant.owner, plant.name, plant.tag).changes === 1) {
      this.log.record('plant.created', plant.owner, plant.id, createdPayload(plant));
      this.pages.invalidate(plant.owner);
      this.eventsWritten();
      return { created: true };
    }
    return { created: false, existing: byId.get(plant.id) as PlantRow };
  }

  /** The reads of one turn: one check of data_version for all of them, then one lookup each. */
  readPages(pages: readonly PlantPage[]): Array<readonly PlantRecord[]> {
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

  /**
   * A file is read on a connection of its own, in one read transaction (sqlite/snapshot.ts). An
   * in-memory database has no second connection, and no other process writes it: it is read whole,
   * in one synchronous statement, which nothing can interleave with.
   */
  snapshot(pageSize: number): AsyncIterable<readonly PlantRecord[]> {
    if (!this.db.memory) return snapshotPages(this.db.name, pageSize);
    const rows = this.sql.listAll.all(FIRST_ID, -1) as PlantRow[]; // LIMIT -1: no limit
    return (async function* () {
      for (let at = 0; at < rows.length; at += pageSize) yield rows.slice(at, at + pageSize);
    })();
  }

  /** The connection's page cache is IMPORT_CACHE_KIB while `run` runs, then what it was. */
  async importing<T>(run: () => Promise<T>): Promise<T> {
    const before = this.db.pragma('cache_size', { simple: true }) as number;
    this.db.pragma(`cache_size = -${IMPORT_CACHE_KIB}`);
    try {
      return await run();
    } finally {
      this.db.pragma(`cache_size = ${before}`);
    }
  }

  // One IMMEDIATE transaction: a single fsync for the whole batch.
  insertBatch(plants: readonly PlantRecord[]): BatchResult {
    const { insert, byId } = this.sql;
    let inserted = 0;
    let unchanged = 0;
    const conflicts: PlantRecord[] = [];
    this.db
      .transaction(() => {
        for (const plant of plants) {
          if (insert.run(plant.id, plant.owner, plant.name, plant.tag).changes === 1) {
            this.log.record('plant.created', plant.owner, plant.id, createdPayload(plant));
            inserted += 1;
          } else if (samePlant(byId.get(plant.id) as PlantRow, plant)) unchanged += 1;
          else conflicts.push(plant);
        }
      })
      .immediate();
    if (inserted > 0) this.pages.clear();
    return { inserted, unchanged, conflicts };
  }

  /** Inside the caller's transaction, as create. */
  delete(id: bigint, owner: string | null): boolean {
    const { delete: remove, deleteOwn } = this.sql;
    const deleted = (owner === null ? remove.get(id) : deleteOwn.get(id, owner)) as string | undefined;
    if (deleted === undefined) return false;
    this.log.record('plant.deleted', deleted, id, deletedPayload(id));
    this.pages.invalidate(owner); // null: an admin's delete, whose owner is not known here
    this.eventsWritten();
    return true;
  }

  count(): number {
    return this.sql.count.get() as number;
  }
}
