import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { type DatabaseTarget, describeDatabase, loadConfig } from '../config.js';
import { io } from './io.js';
import type { Store } from '../store/store.js';
import { err } from './output.js';

/**
 * Which database a command uses, as its first line on stderr, never with a password (operations
 * issue, 3): without DATABASE_URL a command quietly used data/plant-store.db of whatever folder it
 * ran in, and `token create` succeeded against a database no server read.
 *
 *   plant-store: database sqlite:data/plant-store.db (/srv/plants/data/plant-store.db)
 *   plant-store: database sqlite:/tmp/x.db (a new file: it did not exist)
 *   plant-store: database postgres://app@db.example:5432/plants
 */
export function databaseLine(database: DatabaseTarget): string {
  const notes: string[] = [];
  if (database.engine === 'sqlite') {
    if (database.path === ':memory:') notes.push('in memory: nothing is kept after the command');
    else {
      if (!isAbsolute(database.path)) notes.push(resolve(database.path));
      if (!existsSync(database.path)) notes.push('a new file: it did not exist');
    }
  }
  return `plant-store: database ${describeDatabase(database)}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`;
}

/**
 * Opens the configured store, brought up to date, for one command, and says which database it is.
 * The store's modules (both drivers, the schema's validators) load here, when a command has read
 * its input and opens the database, not when a module imports this one: a usage mistake or a
 * --help never loads them.
 */
export async function withStore<T>(run: (store: Store, applied: number[]) => Promise<T>): Promise<T> {
  const config = loadConfig(io().env);
  err(databaseLine(config.database));
  const { openStore } = await import('../store/open-store.js');
  const store = await openStore(config.database, { poolSize: config.databasePoolSize });
  try {
    return await run(store, await store.migrate());
  } finally {
    await store.close();
  }
}
