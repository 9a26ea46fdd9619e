import type { TokenRecord, TokenStore } from '../store/store.js';
import type { JwtVerifier } from './jwt.js';
import { TOKEN_PREFIX, hasValidChecksum, tokenId, tokenMatches } from './token.js';

export interface Principal {
  readonly subject: string;
  readonly scopes: ReadonlySet<string>;
  readonly tokenId: string;
}

interface Cached {
  readonly record: TokenRecord | undefined;
  readonly principal: Principal | undefined;
  readonly fetchedAt: number;
}

const CACHE_MAX = 10_000;

/**
 * Answers "who holds this token?" without a database query on every request: a token record is
 * reused for `cacheMs`, so a revocation made elsewhere (the CLI, another instance) takes effect
 * within that time. Expiry is checked on every request against the clock.
 */
export class TokenAuthenticator {
  private readonly cache = new Map<string, Cached>();

  constructor(
    private readonly store: TokenStore,
    private readonly clock: () => number,
    private readonly cacheMs: number,
    /** Set when JWTs from an OpenID Connect provider are accepted beside API tokens. */
    private readonly jwt?: JwtVerifier,
  ) {}

  /** Synchronous while the token's record is cached: the hot path allocates no promise. */
  authenticate(token: string): Principal | undefined | Promise<Principal | undefined> {
    if (this.jwt && !token.startsWith(TOKEN_PREFIX)) return this.jwt.verify(token);
    const id = tokenId(token);
    if (id === undefined) return undefined;
    const hit = this.cache.get(id);
    // A cached record needs no checksum first: the digest decides, and the checksum only spares a lookup.
    if (hit && this.clock() - hit.fetchedAt < this.cacheMs) return this.verify(token, hit);
    if (!hasValidChecksum(token)) return undefined;
    return this.fetch(id).then((entry) => this.verify(token, entry));
  }

  private verify(token: string, { record, principal }: Cached): Principal | undefined {
    if (!record || !tokenMatches(token, record.secretHash)) return undefined;
    const now = this.clock();
    if (record.revokedAt !== null && record.revokedAt <= now) return undefined;
    if (record.expiresAt !== null && record.expiresAt <= now) return undefined;
    return principal;
  }

  private async fetch(id: string): Promise<Cached> {
    const record = await this.store.findToken(id);
    const principal = record && { subject: record.subject, scopes: new Set(record.scopes), tokenId: record.id };
    if (this.cache.size >= CACHE_MAX) this.cache.clear();
    const entry = { record, principal, fetchedAt: this.clock() };
    this.cache.set(id, entry);
    return entry;
  }
}
