import type { TokenRecord, TokenStore } from '../store/store.js';
import { SCOPES, hashToken, isScope, isSubject, mintToken, type Scope } from './token.js';

export class TokenInputError extends Error {
  override name = 'TokenInputError';
}

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

/** Issuing, listing and revoking API tokens: the rules behind `plant-store token …`. */
export class TokenService {
  constructor(
    private readonly store: TokenStore,
    private readonly clock: () => number = Date.now,
  ) {}

  async create({ subject, scopes, expiresInMs }: NewToken): Promise<IssuedToken> {
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
    return { id, token, subject, scopes: unique as Scope[], expiresAt: record.expiresAt };
  }

  list(): Promise<TokenRecord[]> {
    return this.store.listTokens();
  }

  revoke(id: string): Promise<boolean> {
    return this.store.revokeToken(id, this.clock());
  }
}
