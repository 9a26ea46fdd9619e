import type Database from 'better-sqlite3';
import { BEFORE_EVERY_TOKEN, type TicketRecord, type TokenPage, type TokenRecord } from '../store.js';

// API tokens on SQLite: stored with the hash of the secret (never the secret), found by their
// public id, listed, revoked. Times are the issuing host's clock, as the caller gives them.

interface TokenRow {
  id: string;
  secret_hash: Buffer;
  subject: string;
  scopes: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

interface TicketRow {
  hash: Buffer;
  token_id: string;
  subject: string;
  scopes: string;
  expires_at: number;
  credential_expires_at: number | null;
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

// Prepared once, after migrations created the table.
export function prepareTokenStatements(db: Database.Database) {
  return {
    insert: db.prepare(
      'INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    byId: db.prepare('SELECT * FROM api_tokens WHERE id = ?'),
    // Through api_tokens_created and api_tokens_subject (migration 9): a page at any place in O(log n).
    page: db.prepare('SELECT * FROM api_tokens WHERE (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?'),
    pageOfSubject: db.prepare(
      'SELECT * FROM api_tokens WHERE subject = ? AND (created_at, id) > (?, ?) ORDER BY created_at, id LIMIT ?',
    ),
    revoke: db.prepare('UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?'),
    ticketInsert: db.prepare(
      'INSERT INTO event_tickets (hash, token_id, subject, scopes, expires_at, credential_expires_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    ticketsExpired: db.prepare('DELETE FROM event_tickets WHERE expires_at <= ?'),
    ticketSpend: db.prepare('DELETE FROM event_tickets WHERE hash = ? AND expires_at > ? RETURNING *'),
  };
}

type Statements = ReturnType<typeof prepareTokenStatements>;

export class SqliteTokens {
  constructor(private readonly sql: Statements) {}

  create(t: TokenRecord): void {
    this.sql.insert.run(t.id, t.secretHash, t.subject, t.scopes.join(' '), t.createdAt, t.expiresAt, t.revokedAt);
  }

  find(id: string): TokenRecord | undefined {
    const row = this.sql.byId.get(id) as TokenRow | undefined;
    return row && toToken(row);
  }

  list({ after, subject, limit }: TokenPage): TokenRecord[] {
    const { createdAt, id } = after ?? BEFORE_EVERY_TOKEN;
    const rows =
      subject === null
        ? this.sql.page.all(createdAt, id, limit)
        : this.sql.pageOfSubject.all(subject, createdAt, id, limit);
    return (rows as TokenRow[]).map(toToken);
  }

  /** Run inside a write transaction (the group commit): the insert and the sweep of expired ones. */
  createTicket(t: Omit<TicketRecord, 'expiresAt'>, now: number, lifetimeMs: number): number {
    const expiresAt = now + lifetimeMs;
    this.sql.ticketsExpired.run(now);
    this.sql.ticketInsert.run(t.hash, t.tokenId, t.subject, t.scopes.join(' '), expiresAt, t.credentialExpiresAt);
    return expiresAt;
  }

  spendTicket(hash: Buffer, now: number): TicketRecord | undefined {
    const row = this.sql.ticketSpend.get(hash, now) as TicketRow | undefined;
    return (
      row && {
        hash: row.hash,
        tokenId: row.token_id,
        subject: row.subject,
        scopes: row.scopes.split(' '),
        expiresAt: row.expires_at,
        credentialExpiresAt: row.credential_expires_at,
      }
    );
  }

  /** False when there is no such token; a second revocation keeps the first time. */
  revoke(id: string, at: number): boolean {
    return this.sql.revoke.run(at, id).changes === 1;
  }
}
