import type pg from 'pg';
import { type STATEMENTS, runStatement } from './postgres-statements.js';
import type { TokenRecord } from './store.js';

// API tokens on PostgreSQL: stored with the hash of the secret (never the secret), found by their
// public id, listed, revoked. Every time is the database's clock (issue 13; postgres-statements.ts).

interface TokenRow {
  id: string;
  secret_hash: Buffer;
  subject: string;
  scopes: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  read_at?: string;
}

const optionalNumber = (value: string | null): number | null => (value === null ? null : Number(value));

const toToken = (row: TokenRow): TokenRecord => ({
  id: row.id,
  secretHash: row.secret_hash,
  subject: row.subject,
  scopes: row.scopes.split(' '),
  createdAt: Number(row.created_at),
  expiresAt: optionalNumber(row.expires_at),
  revokedAt: optionalNumber(row.revoked_at),
  ...(row.read_at !== undefined && { readAt: Number(row.read_at) }),
});

export class PostgresTokens {
  constructor(private readonly pool: pg.Pool) {}

  private run<R extends pg.QueryResultRow>(
    name: keyof typeof STATEMENTS,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return runStatement<R>(this.pool, name, values);
  }

  /** Stamped with the database's clock: the lifetime asked for is kept, the issuing host's time is not. */
  async create(t: TokenRecord): Promise<void> {
    const lifetime = t.expiresAt === null ? null : t.expiresAt - t.createdAt;
    await this.run('tokenInsert', [t.id, t.secretHash, t.subject, t.scopes.join(' '), lifetime]);
  }

  async find(id: string): Promise<TokenRecord | undefined> {
    const row = (await this.run<TokenRow>('tokenById', [id])).rows[0];
    return row && toToken(row);
  }

  async list(): Promise<TokenRecord[]> {
    return (await this.run<TokenRow>('tokenAll', [])).rows.map(toToken);
  }

  /** Stamped with the database's clock; `at` (the calling host's) is not trusted. */
  async revoke(id: string, _at: number): Promise<boolean> {
    return (await this.run('tokenRevoke', [id])).rowCount === 1;
  }
}
