import type { TokenRecord, TokenStore } from '../store/store.js';
import type { JwtVerifier } from './jwt.js';
import type { Principal } from './principal.js';
import { TOKEN_PREFIX, hasValidChecksum, tokenId, tokenMatches } from './token.js';
import type { UnknownTokenBudget } from './unknown-token-budget.js';

/**
 * Why a token was refused, for the log: the token's id when it has one (never the
 * secret), and the reason.
 */
export class Refusal {
  constructor(
    readonly reason:
      'malformed' | 'unknown' | 'expired' | 'revoked' | 'wrong secret' | 'invalid JWT' | 'too many unknown tokens',
    readonly tokenId?: string,
    /** With 'too many unknown tokens': when the client may ask again. */
    readonly retryAfterMs?: number,
  ) {}
}

interface Cached {
  readonly record: TokenRecord | undefined;
  readonly principal: Principal | undefined;
  readonly fetchedAt: number;
}

/** How often the offset to the store's clock is measured again (it moves only when a clock is set). */
const SKEW_REFRESH_MS = 10 * 60_000;

/** Tokens found, and ids found to hold none: two maps, so that unknown ids never evict real tokens. */
const CACHE_MAX = 10_000;
const UNKNOWN_MAX = 10_000;

/**
 * Answers "who holds this token?" without a database query on every request: a token record is
 * reused for `cacheMs`, so a revocation made elsewhere (the CLI, another instance) takes effect
 * within that time. Expiry is checked on every request, on the store's clock where it keeps one
 * (the same clock stamped it: this host's clock may be off), and a revoked token is refused
 * whatever any clock says: no revocation is in the future.
 */
export class TokenAuthenticator {
  private readonly cache = new Map<string, Cached>();
  private readonly unknown = new Map<string, Cached>();
  /** The store's clock minus ours (0 where the store keeps no clock), and when it was measured. */
  private skew = 0;
  private skewMeasuredAt = -Infinity;

  constructor(
    private readonly store: TokenStore,
    private readonly clock: () => number,
    private readonly cacheMs: number,
    /** Set when JWTs from an OpenID Connect provider are accepted beside API tokens. */
    private readonly jwt?: JwtVerifier,
    /** Bounds the lookups of unknown tokens per client; without it every forged token is a lookup. */
    private readonly budget?: UnknownTokenBudget,
  ) {}

  /**
   * Synchronous while the token's record is cached: the hot path allocates no promise. `client`,
   * the request's address, is charged a lookup of `budget` for a token this process has not seen;
   * a token it found before (its entry stale or not) is looked up again whatever the budget says.
   */
  authenticate(token: string, client?: string): Principal | Refusal | Promise<Principal | Refusal> {
    if (this.jwt && !token.startsWith(TOKEN_PREFIX))
      return this.jwt.verify(token).then((principal) => principal ?? new Refusal('invalid JWT'));
    const id = tokenId(token);
    if (id === undefined) return new Refusal('malformed');
    const now = this.clock();
    const hit = this.cache.get(id) ?? this.unknown.get(id);
    // A cached record needs no checksum first: the digest decides, and the checksum only spares a lookup.
    if (hit && now - hit.fetchedAt < this.cacheMs) return this.verify(token, id, hit);
    if (!hasValidChecksum(token)) return new Refusal('malformed', id);
    const charged = client !== undefined && this.budget !== undefined && !this.cache.has(id);
    if (charged) {
      const wait = this.budget.take(client);
      if (wait > 0) return new Refusal('too many unknown tokens', id, wait);
    }
    return this.fetch(id).then((entry) => {
      if (charged && entry.record) this.budget.giveBack(client);
      return this.verify(token, id, entry);
    });
  }

  /**
   * Whether `token` is still accepted, for the checks of long-lived streams: false once refused
   * (revoked, expired, unknown); true while it cannot be judged (the store or the identity
   * provider away), so that an outage ends no stream by itself.
   */
  async accepts(token: string): Promise<boolean> {
    try {
      return !((await this.authenticate(token)) instanceof Refusal);
    } catch {
      return true;
    }
  }

  /**
   * Whether the token with this id is still accepted, its secret not presented: for what a token
   * handed on (a ticket of the change feed, and the stream it opened). A JWT (`jwt:…`) has no record
   * here; `until`, its `exp`, says when it ends. True while the store cannot be asked, as `accepts`.
   */
  async acceptsId(id: string, until: number | null): Promise<boolean> {
    if (until !== null) return until > this.clock();
    try {
      const hit = this.cache.get(id) ?? this.unknown.get(id);
      const { record } = hit && this.clock() - hit.fetchedAt < this.cacheMs ? hit : await this.fetch(id);
      if (!record || record.revokedAt !== null) return false;
      return record.expiresAt === null || record.expiresAt > this.clock() + this.skew;
    } catch {
      return true;
    }
  }

  private verify(token: string, id: string, { record, principal }: Cached): Principal | Refusal {
    if (!record || !principal) return new Refusal('unknown', id);
    if (!tokenMatches(token, record.secretHash)) return new Refusal('wrong secret', id);
    if (record.revokedAt !== null) return new Refusal('revoked', id);
    if (record.expiresAt !== null && record.expiresAt <= this.clock() + this.skew) return new Refusal('expired', id);
    return principal;
  }

  private async fetch(id: string): Promise<Cached> {
    const record = await this.store.findToken(id);
    const principal = record && { subject: record.subject, scopes: new Set(record.scopes), tokenId: record.id };
    const fetchedAt = this.clock();
    if (record?.readAt !== undefined && fetchedAt - this.skewMeasuredAt > SKEW_REFRESH_MS) {
      this.skew = record.readAt - fetchedAt;
      this.skewMeasuredAt = fetchedAt;
    }
    const entry = { record, principal, fetchedAt };
    const [kept, other, max] = record ? [this.cache, this.unknown, CACHE_MAX] : [this.unknown, this.cache, UNKNOWN_MAX];
    other.delete(id);
    kept.delete(id); // re-inserted last: when full, the entry fetched longest ago goes first
    if (kept.size >= max) kept.delete(kept.keys().next().value!);
    kept.set(id, entry);
    return entry;
  }
}
