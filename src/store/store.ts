// The storage port: what the rules need from a database, and nothing about SQL
// (docs/conventions.md#layout). Here the plants' and the tokens' parts and the whole Store; the
// events' part is event-store.ts, the webhooks' webhook-store.ts.

import type { EventStore } from './event-store.js';
import type { WebhookStore } from './webhook-store.js';

/** The database cannot be reached or cannot serve now; the request may succeed when retried. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

/**
 * The log fields for a background read or write that failed (the dispatcher, the pruner, the change
 * feed's poll): an unavailable database is expected in an outage, so only its reason, once and not
 * doubled, as the error handler logs it; anything else with its stack.
 */
export const failureFields = (error: unknown): { reason: string } | { err: unknown } =>
  error instanceof StoreUnavailableError ? { reason: error.message } : { err: error };

export interface PlantRecord {
  readonly id: bigint;
  /** The subject of the token that created the plant. */
  readonly owner: string;
  readonly name: string;
  readonly tag: string | null;
}

export interface PlantPage {
  /** Only this owner's plants; null for every plant (plants:admin). */
  readonly owner: string | null;
  readonly tag: string | null;
  /** The smallest id to include. */
  readonly fromId: bigint;
  readonly limit: number;
}

export type CreateResult = { readonly created: true } | { readonly created: false; readonly existing: PlantRecord };

export interface BatchResult {
  readonly inserted: number;
  /** Plants already stored exactly as given: a repeated import changes nothing. */
  readonly unchanged: number;
  /** Plants whose id another plant (other owner, name or tag) already holds; not stored. */
  readonly conflicts: readonly PlantRecord[];
}

export interface PlantStore {
  /** Inserts the plant unless its id is taken; then answers with the plant that holds the id. */
  createPlant(plant: PlantRecord): Promise<CreateResult>;
  /** Plants in ascending id order. */
  listPlants(page: PlantPage): Promise<readonly PlantRecord[]>;
  /** False when no plant has this id (or, with an owner, none of that owner's). */
  deletePlant(id: bigint, owner: string | null): Promise<boolean>;
  /** Stores a batch in one transaction, never overwriting: what `plant-store import` uses. */
  insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult>;
  /**
   * Runs an import's batches: the store may size itself for them meanwhile (SQLite: a larger page
   * cache for its connection), and is as before once `run` settles. Optional: a store without it
   * imports as it is.
   */
  importing?<T>(run: () => Promise<T>): Promise<T>;
  /**
   * Every plant in id order, `pageSize` at a time, all read from one snapshot: the store as it was
   * at one instant, whatever commits while the pages are read (writers are not blocked meanwhile).
   * What `plant-store export` uses.
   */
  snapshotPlants(pageSize: number): AsyncIterable<readonly PlantRecord[]>;
}

/** The smallest and the largest plant id (int64): where a walk through every plant starts and stops. */
export const FIRST_ID = -(2n ** 63n);
export const LAST_ID = 2n ** 63n - 1n;

/** Whether two records are the same plant, owner included. */
export const samePlant = (a: PlantRecord, b: PlantRecord): boolean =>
  a.id === b.id && a.owner === b.owner && a.name === b.name && a.tag === b.tag;

export interface TokenRecord {
  /** The public half of the token, shown by `token list`. */
  readonly id: string;
  /** SHA-256 of the whole token; the secret itself is never stored. */
  readonly secretHash: Buffer;
  readonly subject: string;
  readonly scopes: readonly string[];
  readonly createdAt: number;
  readonly expiresAt: number | null;
  /** When the token was revoked; any value means revoked, whatever any clock says. */
  readonly revokedAt: number | null;
  /**
   * The store's clock when this record was read, where the store keeps time itself (PostgreSQL:
   * the database's clock stamps creation, expiry and revocation). Expiry is judged on that clock.
   */
  readonly readAt?: number;
}

/**
 * A ticket of the change feed (interface 1.3.0, POST /events/tickets): what a browser's
 * EventSource, which cannot send `Authorization`, opens a stream with. Kept by the hash of the
 * ticket (never the ticket), bound to the token that asked for it, spent once.
 */
export interface TicketRecord {
  /** SHA-256 of the whole ticket. */
  readonly hash: Buffer;
  /** The token's id (an API token's public id, or `jwt:<subject>`). */
  readonly tokenId: string;
  readonly subject: string;
  readonly scopes: readonly string[];
  /** When the ticket can no longer be spent, ms since the epoch (PostgreSQL: on its own clock). */
  readonly expiresAt: number;
  /** When the credential behind it ends where no token record says so (a JWT's `exp`); else null. */
  readonly credentialExpiresAt: number | null;
}

/**
 * A page of the token listing (`token list`). The listing's order is creation, oldest first, then
 * id (tokens made in the same millisecond): a token never moves in it, and the index of each engine
 * on (created_at, id), or (subject, created_at, id), reads a page at any place in O(log n).
 */
export interface TokenPage {
  /** The page starts after this token (its creation time and id); null: at the start. */
  readonly after: Pick<TokenRecord, 'createdAt' | 'id'> | null;
  /** Only this subject's tokens; null: every subject's. */
  readonly subject: string | null;
  readonly limit: number;
}

/** Before every token in the listing's order: where a page without `after` starts. */
export const BEFORE_EVERY_TOKEN = { createdAt: Number.MIN_SAFE_INTEGER, id: '' } as const;

export interface TokenStore {
  createToken(token: TokenRecord): Promise<void>;
  findToken(id: string): Promise<TokenRecord | undefined>;
  listTokens(page: TokenPage): Promise<TokenRecord[]>;
  /** False when there is no such token. Revoking twice keeps the first time. */
  revokeToken(id: string, at: number): Promise<boolean>;
  /**
   * Keeps a new ticket, valid for `lifetimeMs` from `now` (PostgreSQL: from its own clock), and
   * forgets the tickets that ran out unspent. Returns when it expires.
   */
  createTicket(ticket: Omit<TicketRecord, 'expiresAt'>, now: number, lifetimeMs: number): Promise<number>;
  /** The ticket with this hash, removed so that it cannot be spent twice; undefined when none or expired. */
  spendTicket(hash: Buffer, now: number): Promise<TicketRecord | undefined>;
}

export interface Store extends PlantStore, TokenStore, EventStore, WebhookStore {
  readonly engine: 'sqlite' | 'postgres';
  /** Applies pending schema migrations; answers the versions it applied. */
  migrate(): Promise<number[]>;
  /** Settings of the database that weaken "a 200 is durably committed"; empty when there are none. */
  durabilityWarnings(): Promise<string[]>;
  /** True when the database answers a query. */
  isReady(): Promise<boolean>;
  /**
   * With a PostgreSQL URL of more than one server (interface 1.3.0): the server in use (`host:port`,
   * undefined while none is found), the requests waiting now for one to write to, and the servers
   * refused now (an older timeline, another database system) with why. Undefined
   * for SQLite and for one server.
   */
  databaseRoute?():
    | {
        readonly host: string | undefined;
        readonly waiting: number;
        readonly refused: ReadonlyMap<string, { readonly kind: string; readonly why: string }>;
      }
    | undefined;
  /** How many plants are stored, all owners together (for the metrics). */
  countPlants(): Promise<number>;
  close(): Promise<void>;
}
