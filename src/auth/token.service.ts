import type { TokenPage, TokenRecord, TokenStore } from '../store/store.js';
import { SCOPES, hashToken, isScope, isSubject, mintToken, type Scope } from './token.js';

export class TokenInputError extends Error {
  override name = 'TokenInputError';
}

/** Tokens read from the store at a time by `list`. */
export const LIST_BATCH = 1000;

export interface NewToken {
  readonly subject: string;
  readonly scopes: readonly string[];
  /** Lifetime in milliseconds; undefined for a token that does not expire. */
  readonly expiresInMs?: number | undefined;
}

export interface IssuedToken {
  readonly id: string;
  /** The secret: shown once, never stored. */
  readonly token: string;
  readonly subject: string;
  readonly scopes: readonly Scope[];
  readonly expiresAt: number | null;
}

/**
 * The scopes a new token of `subject` gets (each once), or a TokenInputError saying what is wrong
 * with the subject or the scopes. TokenService.create checks with it; `token create` calls it
 * before it opens the database, so a mistyped scope costs no connection.
 */
export function checkNewToken(subject: string, scopes: readonly string[]): Scope[] {
  if (!isSubject(subject)) {
    throw new TokenInputError('the subject must be 1 to 200 characters without control characters');
  }
  const unique = [...new Set(scopes)];
  const bad = unique.filter((s) => !isScope(s));
  if (unique.length === 0 || bad.length > 0) {
    throw new TokenInputError(
      `scopes must be a comma-separated list of ${SCOPES.join(', ')}${bad.length ? `; unknown: ${bad.join(', ')}` : ''}`,
    );
  }
  return unique as Scope[];
}

/** Issuing, listing and revoking API tokens: the rules behind `plant-store token …`. */
export class TokenService {
  constructor(
    private readonly store: TokenStore,
    private readonly clock: () => number = Date.now,
  ) {}

  async create({ subject, scopes, expiresInMs }: NewToken): Promise<IssuedToken> {
    const unique = checkNewToken(subject, scopes);
    const { id, token } = mintToken();
    const now = this.clock();
    const record: TokenRecord = {
      id,
      secretHash: hashToken(token),
      subject,
      scopes: unique,
      createdAt: now,
      expiresAt: expiresInMs === undefined ? null : now + expiresInMs,
      revokedAt: null,
    };
    await this.store.createToken(record);
    return { id, token, subject, scopes: unique, expiresAt: record.expiresAt };
  }

  /**
   * The tokens in the listing's order (creation, then id: store.ts, TokenPage): those after the
   * token whose id is `after` when given, only `subject`'s when given, at most `limit`. Read from
   * the store `batch` at a time, so what is held does not grow with the number of tokens.
   */
  async *list({
    after,
    subject,
    limit = Infinity,
    batch = LIST_BATCH,
  }: { after?: string; subject?: string; limit?: number; batch?: number } = {}): AsyncGenerator<TokenRecord> {
    let from: TokenPage['after'] = null;
    if (after !== undefined) {
      from = (await this.store.findToken(after)) ?? null;
      if (from === null) throw new TokenInputError(`--after: no token has the id ${after} (token list prints the ids)`);
    }
    let remaining = limit;
    while (remaining > 0) {
      const size = Math.min(batch, remaining);
      const page = await this.store.listTokens({ after: from, subject: subject ?? null, limit: size });
      yield* page;
      if (page.length < size) return;
      remaining -= size;
      from = page.at(-1)!;
    }
  }

  revoke(id: string): Promise<boolean> {
    return this.store.revokeToken(id, this.clock());
  }
}
