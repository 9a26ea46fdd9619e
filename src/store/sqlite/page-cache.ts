/**
 * Recently read list pages of one SQLite connection, so that a repeated GET costs a map lookup
 * instead of a query. It is exact, never merely "fresh enough":
 *
 * - this connection's own writes drop the pages of the owner they touched, and every page listed
 *   across owners (plants:admin), in the same synchronous step that commits them;
 * - a commit by any other connection or process changes SQLite's `PRAGMA data_version`, which the
 *   store reads before every lookup, and drops every page.
 *
 * Memory is bounded by the rows held, each page counting one more than its rows (so that many empty
 * pages, which a caller can ask for with made-up tags or cursors, count too): past `maxRows` the
 * cache starts over.
 */
export class PageCache<Row> {
  /** owner (null: across owners) → page key → rows. */
  private readonly pages = new Map<string | null, Map<string, readonly Row[]>>();
  private rows = 0;
  private version: unknown;

  constructor(private readonly maxRows: number) {}

  /** Drops everything when `version` (SQLite's data_version) differs from the last one seen. */
  check(version: unknown): void {
    if (version !== this.version) {
      this.clear();
      this.version = version;
    }
  }

  get(owner: string | null, key: string): readonly Row[] | undefined {
    return this.pages.get(owner)?.get(key);
  }

  set(owner: string | null, key: string, rows: readonly Row[]): void {
    const weight = 1 + rows.length;
    if (weight > this.maxRows) return;
    if (this.rows + weight > this.maxRows) this.clear();
    const byKey = this.pages.get(owner);
    if (byKey) byKey.set(key, rows);
    else this.pages.set(owner, new Map([[key, rows]]));
    this.rows += weight;
  }

  /** A write to `owner`'s plants; null when the owner is not known (every page goes). */
  invalidate(owner: string | null): void {
    if (owner === null) return this.clear();
    this.drop(owner);
    this.drop(null);
  }

  clear(): void {
    this.pages.clear();
    this.rows = 0;
  }

  private drop(owner: string | null): void {
    const byKey = this.pages.get(owner);
    if (!byKey) return;
    for (const rows of byKey.values()) this.rows -= 1 + rows.length;
    this.pages.delete(owner);
  }
}
