import type { DatabaseTarget } from '../config.js';
import type { PostgresOptions } from './postgres/connection.js';
import { openPostgres } from './postgres/store.js';
import type { SqliteOptions } from './sqlite/connection.js';
import { openSqlite } from './sqlite/store.js';
import type { Store } from './store.js';

export interface StoreOptions extends PostgresOptions {
  readonly sqlite?: SqliteOptions;
}

/** The one place that picks an adapter for a DATABASE_URL. */
export function openStore(target: DatabaseTarget, options: StoreOptions = {}): Promise<Store> {
  return Promise.resolve(
    target.engine === 'sqlite' ? openSqlite(target.path, options.sqlite) : openPostgres(target.url, options),
  );
}
