import type pg from 'pg';
import { type STATEMENTS, runStatement } from './statements.js';
import { BEFORE_EVERY_TOKEN, type TicketRecord, type TokenPage, type TokenRecord } from '../store.js';

// API tokens on PostgreSQL: stored with the hash of the secret (never the secret), found by their
// public id, listed, revoked. Every time is the database's clock (postgres/statements.ts), so a
// host whose clock is off neither shortens nor stretches a token's life.

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

interface TicketRow {
  hash: Buffer;
  token_id: string;
  subject: string;
  scopes: string;
  expires_at: string;
  credential_expires_at: string | null;
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

  async list({ after, subject, limit }: TokenPage): Promise<TokenRecord[]> {
    const { createdAt, id } = after ?? BEFORE_EVERY_TOKEN;
    const result =
      subject === null
        ? await this.run<TokenRow>('tokenPage', [createdAt, id, limit])
        : await this.run<TokenRow>('tokenPageOfSubject', [subject, createdAt, id, limit]);
    return result.rows.map(toToken);
  }

  /** Its lifetime runs on the database's clock (`now`, the calling host's, is not used). */
  async createTicket(t: Omit<TicketRecord, 'expiresAt'>, _now: number, lifetimeMs: number): Promise<number> {
    const values = [t.hash, t.tokenId, t.subject, t.scopes.join(' '), lifetimeMs, t.credentialExpiresAt];
    const row = (await this.run<{ expires_at: string }>('ticketInsert', values)).rows[0]!;
    return Number(row.expires_at);
  }

  async spendTicket(hash: Buffer, _now: number): Promise<TicketRecord | undefined> {
    const row = (await this.run<TicketRow>('ticketSpend', [hash])).rows[0];
    return (
      row && {
        hash: row.hash,
        tokenId: row.token_id,
        subject: row.subject,
        scopes: row.scopes.split(' '),
        expiresAt: Number(row.expires_at),
        credentialExpiresAt: optionalNumber(row.credential_expires_at),
      }
    );
  }

  /** Stamped with the database's clock; `at` (the calling host's) is not trusted. */
  async revoke(id: string, _at: number): Promise<boolean> {
    return (await this.run('tokenRevoke', [id])).rowCount === 1;
  }
}
