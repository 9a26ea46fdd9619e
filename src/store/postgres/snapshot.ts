import type pg from 'pg';
import { classifyPostgresError } from './errors.js';
import { type PlantRow, toPlant } from './plants.js';
import { STATEMENTS } from './statements.js';
import { FIRST_ID, LAST_ID, type PlantRecord } from '../store.js';

// One snapshot of the plants on PostgreSQL, read page by page (`plant-store export`).

/**
 * One REPEATABLE READ, READ ONLY transaction on a connection of its own: every page is read from
 * the snapshot its first query took, and writers are not blocked meanwhile (MVCC). Keyset pages,
 * so only one page is held in memory.
 */
export async function* snapshotPages(pool: pg.Pool, pageSize: number): AsyncGenerator<readonly PlantRecord[]> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
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
