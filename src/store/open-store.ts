import type { DatabaseTarget } from '../config.js';
import { type PostgresOptions, openPostgres } from './postgres.js';
import { openSqlite } from './sqlite.js';
import type { Store } from './store.js';

/** The one place that picks an adapter for a DATABASE_URL. */
export function openStore(target: DatabaseTarget, options: PostgresOptions = {}): Promise<Store> {
  return Promise.resolve(target.engine === 'sqlite' ? openSqlite(target.path) : openPostgres(target.url, options));
}
