// The storage port: what the rules need from a database, and nothing about SQL (STYLE.md).

/** The database cannot be reached or cannot serve now; the request may succeed when retried. */
export class StoreUnavailableError extends Error {
  override name = 'StoreUnavailableError';
}

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
}

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
  readonly revokedAt: number | null;
}

export interface TokenStore {
  createToken(token: TokenRecord): Promise<void>;
  findToken(id: string): Promise<TokenRecord | undefined>;
  listTokens(): Promise<TokenRecord[]>;
  /** False when there is no such token. Revoking twice keeps the first time. */
  revokeToken(id: string, at: number): Promise<boolean>;
}

export interface Store extends PlantStore, TokenStore {
  readonly engine: 'sqlite' | 'postgres';
  /** Applies pending schema migrations; answers the versions it applied. */
  migrate(): Promise<number[]>;
  /** Settings of the database that weaken "a 200 is durably committed"; empty when there are none. */
  durabilityWarnings(): Promise<string[]>;
  /** True when the database answers a query. */
  isReady(): Promise<boolean>;
  /** How many plants are stored, all owners together (for the metrics). */
  countPlants(): Promise<number>;
  close(): Promise<void>;
}
