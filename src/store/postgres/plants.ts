import type pg from 'pg';
import { Batcher, Coalescer, failed } from '../batcher.js';
import { CONNECT_TIMEOUT_MS } from './connection.js';
import { classifyPostgresError } from './errors.js';
import { inTransaction } from './transaction.js';
import { routerOf, throughFailover } from './hosts.js';
import { STATEMENTS, runStatement } from './statements.js';
import { createdPayload } from '../event-payload.js';
import {
  type BatchResult,
  type CreateResult,
  type PlantPage,
  type PlantRecord,
  StoreUnavailableError,
  samePlant,
} from '../store.js';

// Plants on PostgreSQL: creates and deletes that wait together become one statement each (one
// round trip, one commit), each with its events (postgres/statements.ts); reads of one page share
// a query; imports come in batches of one transaction.

export interface PlantRow {
  id: string;
  owner: string;
  name: string;
  tag: string | null;
}

// BIGINT arrives as text and becomes a bigint here, exactly.
export const toPlant = (row: PlantRow): PlantRecord => ({
  id: BigInt(row.id),
  owner: row.owner,
  name: row.name,
  tag: row.tag,
});

// Its snapshot is taken after the lock on the total: a count that folded before this one is in it.
const COUNT_FOLDED = `WITH folded AS (
    DELETE FROM plant_count_changes WHERE backend IN (SELECT backend FROM plant_count_changes FOR UPDATE SKIP LOCKED)
    RETURNING backend, n),
  total AS (UPDATE plant_count SET n = n + (SELECT coalesce(sum(n), 0) FROM folded) RETURNING n)
  SELECT (SELECT n FROM total)
    + (SELECT coalesce(sum(c.n), 0) FROM plant_count_changes c WHERE c.backend NOT IN (SELECT backend FROM folded)) AS n`;

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

export class PostgresPlants {
  /** Reads of one page share a query, never one that started before they arrived. */
  private readonly reads = new Coalescer<PlantRecord[]>();
  /** Creates that wait for a connection together are one INSERT: one round trip, one commit. */
  private readonly creates: Batcher<PlantRecord, CreateResult>;

  /** Deletes that wait together are one DELETE, as creates are (see deletePlants). */
  private readonly deletes: Batcher<DeleteRequest, boolean>;

  /** `written` is told after each statement that may have written events, committed or not. */
  constructor(
    private readonly pool: pg.Pool,
    private readonly written: () => void = () => {},
  ) {
    // Each write's deadline, from its arrival: as long as a query may wait for a connection, and
    // with more than one server as long as it may wait for a primary (DATABASE_FAILOVER_WAIT) too.
    const deadlineMs = CONNECT_TIMEOUT_MS + (routerOf(pool)?.waitMs ?? 0);
    this.deletes = new Batcher(
      WRITE_SLOTS,
      MAX_BATCH,
      (items) => this.deletePlants(items),
      deadlineMs,
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
      deadlineMs,
      (sent) =>
        new StoreUnavailableError(
          sent
            ? 'the database did not answer a sent create in time: it may still be stored (an identical retry is safe)'
            : 'the database is not keeping up: a create waited too long for it',
        ),
    );
  }

  private run<R extends pg.QueryResultRow>(
    name: keyof typeof STATEMENTS,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return runStatement<R>(this.pool, name, values);
  }

  create(plant: PlantRecord): Promise<CreateResult> {
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
        let inserted: pg.QueryResult<{ id: string }>;
        try {
          inserted = await this.run<{ id: string }>('insertBatch', columns(batch));
        } finally {
          this.written();
        }
        const stored = new Set(inserted.rows.map((row) => BigInt(row.id)));
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

  list(page: PlantPage): Promise<PlantRecord[]> {
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
    const { insertedIds, holders } = await inTransaction(this.pool, async (client) => {
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
    }).finally(() => this.written());
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

  delete(id: bigint, owner: string | null): Promise<boolean> {
    return this.deletes.submit({ id, owner });
  }

  /**
   * One statement for a batch of deletes, as for creates: events commit in id order under one lock
   * (postgres/statements.ts), so deletes sent one by one would each wait for the others' commits.
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
      const ids = batch.map((i) => items[i]!.id);
      const gone = await this.deleteThroughFailover(
        ids,
        batch.map((i) => items[i]!.owner),
      );
      for (const i of batch) results[i] = gone.has(items[i]!.id);
      pending = later;
    }
    return results;
  }

  /**
   * The ids the DELETE removed. Through a failover (more than one server) it is sent again; if an
   * earlier attempt may have run (its connection went down mid-way), an id the last one did not
   * find counts as removed when no plant holds it any more: the first attempt removed it, or
   * there was none, and the client is told it is gone either way (an id another owner holds
   * still answers as not this caller's).
   */
  private async deleteThroughFailover(ids: bigint[], owners: Array<string | null>): Promise<Set<bigint>> {
    let uncertain = false;
    try {
      const rows = await throughFailover(routerOf(this.pool), true, async (afterUnknown) => {
        uncertain = afterUnknown;
        return (
          await this.pool.query<{ id: string }>({
            name: 'deleteBatch',
            text: STATEMENTS.deleteBatch,
            values: [ids, owners],
          })
        ).rows;
      });
      const gone = new Set(rows.map((row) => BigInt(row.id)));
      if (!uncertain) return gone;
      const left = ids.filter((id) => !gone.has(id));
      if (left.length === 0) return gone;
      const held = new Set((await this.run<PlantRow>('byIds', [left])).rows.map((row) => BigInt(row.id)));
      for (const id of left) if (!held.has(id)) gone.add(id);
      return gone;
    } catch (error) {
      throw classifyPostgresError(error);
    } finally {
      this.written();
    }
  }

  /**
   * The plant count kept by migration 10's triggers: the total plus what each backend changed
   * since, folded into the total on the way (so that the rows to add stay as few as the backends
   * that wrote since the last count). Counts serialize on the total's row; a writer's own row that
   * is locked (its transaction under way) is skipped and read as committed, never waited for.
   */
  async count(): Promise<number> {
    const row = await inTransaction(this.pool, async (client) => {
      await client.query('SELECT n FROM plant_count FOR UPDATE');
      return (await client.query<{ n: string }>(COUNT_FOLDED)).rows[0]!;
    });
    return Number(row.n);
  }
}
