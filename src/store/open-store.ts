import { ConfigError, type DatabaseTarget } from '../config.js';
import { openSqlite } from './sqlite.js';
import type { Store } from './store.js';

/** The one place that picks an adapter for a DATABASE_URL. */
export function openStore(target: DatabaseTarget): Promise<Store> {
  if (target.engine === 'sqlite') return Promise.resolve(openSqlite(target.path));
  return Promise.reject(new ConfigError('this build supports sqlite: databases only; PostgreSQL is not available yet'));
}
