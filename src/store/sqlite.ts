import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { TurnBatch } from './batcher.js';
import { createdPayload, deletedPayload } from './event-payload.js';
import { GroupCommit, isBusy } from './group-commit.js';
import { SqliteEvents, prepareEventStatements } from './sqlite-events.js';
import { prepareBacklogStatements, readBacklog } from './sqlite-backlog.js';
import { SqliteWebhooks, prepareWebhookStatements } from './sqlite-webhooks.js';
import { snapshotPages } from './sqlite-snapshot.js';
import { sqliteMigrations } from './migrations/sqlite.js';
import { PageCache } from './page-cache.js';
import { tracing, untraced } from '../system/tracing-hooks.js';
import {
  type BatchResult,
  type CreateResult,
  type PlantPage,
  type AttemptOutcome,
  type AttemptRecord,
  type AttemptRecorded,
  type ClaimedDelivery,
  type NewWebhookRecord,
  type WebhookPatch,
  type DeliveryRecord,
  type EventRecord,
  type EventRow,
  type EventType,
  type PlantRecord,
  type Store,
  StoreUnavailableError,
  type WebhookRecord,
  type WebhookBacklog,
  type TokenRecord,
  FAN_OUT_BATCH,
  FIRST_ID,
  samePlant,
} from './store.js';

interface PlantRow {
  id: bigint;
  owner: string;
  name: string;
  tag: string | null;
}

interface TokenRow {
  id: string;
  secret_hash: Buffer;
  subject: string;
  scopes: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
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

export interface SqliteOptions {
  /**
   * How a statement waits for another connection's lock. 'block' (the CLI's commands): SQLite's
   * busy_timeout, up to 5 s, blocking the thread. 'event-loop' (the server): no statement ever
   * waits inside SQLite, since better-sqlite3 is synchronous and a wait there would freeze every
   * request; writes retry from the event loop instead (GroupCommit), and a read that meets a lock
   * fails as unavailable (503). Migrations wait either way: they run before the server listens.
   */
  readonly locks?: 'block' | 'event-loop';
  /** How long a server's write may wait for the write lock (GroupCommit); 3 s, as a create on PostgreSQL. */
  readonly lockWaitMs?: number;
}

const BUSY_TIMEOUT_MS = 5000;

/** Opens (creating when missing) a SQLite store with the durability the contract needs. */
export function openSqlite(path: string, { locks = 'block', lockWaitMs }: SqliteOptions = {}): SqliteStore {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path);
  tracing.current?.instrumentSqlite(db); // a span per statement when tracing is on (docs/tracing.md)
  db.pragma(`busy_timeout = ${locks === 'event-loop' ? 0 : BUSY_TIMEOUT_MS}`);
  if (path !== ':memory:') {
    db.pragma('journal_mode = WAL');
    if (db.pragma('journal_mode', { simple: true }) !== 'wal') throw new Error(`could not put ${path} in WAL mode`);
  }
  // FULL: in WAL mode every commit is fsynced before it returns, so a 200 survives power loss.
  db.pragma('synchronous = FULL');
  if (db.pragma('synchronous', { simple: true }) !== 2) throw new Error('could not set synchronous=FULL');
  return new SqliteStore(db, locks === 'event-loop' ? { lockWaitMs: lockWaitMs ?? 3000 } : undefined);
}

/** A statement that met another connection's lock is a database that cannot serve now: 503, not 500. */
function unavailableWhenBusy<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw isBusy(error) ? new StoreUnavailableError('the database is locked', { cause: error }) : error;
  }
}

export class SqliteStore implements Store {
  readonly engine = 'sqlite' as const;
  private statements: ReturnType<SqliteStore['prepare']> | undefined;

  private readonly writes: GroupCommit;
  /** The reads of one turn: one check of data_version for all of them, then one lookup each. */
  private readonly reads = new TurnBatch<PlantPage, readonly PlantRecord[]>((pages) => this.readPages(pages));
  /** At most this many cached rows: a few megabytes. */
  private readonly pages = new PageCache<PlantRow>(50_000);

  /** `nonBlocking`: the server's connection, whose statements never wait inside SQLite for a lock. */
  constructor(
    private readonly db: Database.Database,
    private readonly nonBlocking?: { readonly lockWaitMs: number },
  ) {
    this.writes = new GroupCommit(db, nonBlocking);
    this.leases = new GroupCommit(db, { ...nonBlocking, durable: false });
  }

  /**
   * The dispatcher's own writes (leases, attempts' records): a crash may lose the last of them
   * without harm, as a lost lease runs out and a lost record means the delivery is sent again
   * (at least once), so they are not fsynced each; the next durable commit syncs them too.
   */
  private readonly leases: GroupCommit;

  // Prepared once, after migrations created the tables.
  private prepare() {
    const db = this.db;
    const plants = (sql: string) => db.prepare(sql).safeIntegers(true);
    const list = (where: string) =>
      plants(`SELECT id, owner, name, tag FROM plants WHERE ${where} id >= ? ORDER BY id LIMIT ?`);
    return {
      insert: plants('INSERT INTO plants (id, owner, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING'),
      byId: plants('SELECT id, owner, name, tag FROM plants WHERE id = ?'),
      listAll: list(''),
      listTag: list('tag = ? AND'),
      listOwner: list('owner = ? AND'),
      listOwnerTag: list('owner = ? AND tag = ? AND'),
      delete: plants('DELETE FROM plants WHERE id = ? RETURNING owner').pluck(),
      deleteOwn: plants('DELETE FROM plants WHERE id = ? AND owner = ? RETURNING owner').pluck(),
      dataVersion: db.prepare('PRAGMA data_version').pluck(),
      count: db.prepare('SELECT count(*) FROM plants').pluck(),
      tokenInsert: db.prepare(
        'INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
      ),
      tokenById: db.prepare('SELECT * FROM api_tokens WHERE id = ?'),
      tokenAll: db.prepare('SELECT * FROM api_tokens ORDER BY created_at, id'),
      tokenRevoke: db.prepare('UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?'),
    };
  }

  private get sql() {
    this.statements ??= this.prepare();
    return this.statements;
  }

  private eventStore: SqliteEvents | undefined;
  private get events(): SqliteEvents {
    this.eventStore ??= new SqliteEvents(prepareEventStatements(this.db));
    return this.eventStore;
  }

  private webhookStore: SqliteWebhooks | undefined;
  private get webhooks(): SqliteWebhooks {
    this.webhookStore ??= new SqliteWebhooks(prepareWebhookStatements(this.db), this.events);
    return this.webhookStore;
  }

  private readonly watchers = new Set<() => void>();
  private wakeScheduled = false;
  private watchTimer: NodeJS.Timeout | undefined;
  private seenVersion: unknown;

  /** After the group commit that wrote them (a later turn), the watchers learn of new events. */
  private eventsWritten(): void {
    if (this.wakeScheduled || this.watchers.size === 0) return;
    this.wakeScheduled = true;
    setImmediate(() => {
      this.wakeScheduled = false;
      for (const watcher of this.watchers) watcher();
    });
  }

  migrate(): Promise<number[]> {
    const db = this.db;
    db.exec(
      'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT',
    );
    const applied: number[] = [];
    // IMMEDIATE takes the write lock first, so two processes migrating at once apply each step once.
    const step = db.transaction((m: (typeof sqliteMigrations)[number]) => {
      if (db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version)) return;
      db.exec(m.sql);
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      applied.push(m.version);
    });
    // Migrations run before the server listens, so they may wait for another process's lock.
    if (this.nonBlocking) db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    try {
      for (const m of sqliteMigrations) step.immediate(m);
    } finally {
      if (this.nonBlocking) db.pragma('busy_timeout = 0');
    }
    return Promise.resolve(applied);
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    const { insert, byId } = this.sql;
    // Inside one transaction the holder cannot vanish between the two statements, and the event
    // commits with the plant or not at all.
    return this.writes.run((): CreateResult => {
      if (insert.run(plant.id, plant.owner, plant.name, plant.tag).changes === 1) {
        this.events.record('plant.created', plant.owner, plant.id, createdPayload(plant));
        this.pages.invalidate(plant.owner);
        this.eventsWritten();
        return { created: true };
      }
      return { created: false, existing: byId.get(plant.id) as PlantRow };
    });
  }

  listPlants(page: PlantPage): Promise<readonly PlantRecord[]> {
    return this.reads.submit(page);
  }

  private readPages(pages: readonly PlantPage[]): Array<readonly PlantRecord[]> {
    return unavailableWhenBusy(() => {
      this.pages.check(this.sql.dataVersion.get()); // another connection committed: every page may be stale
      return pages.map((page) => this.readPage(page));
    });
  }

  private readPage({ owner, tag, fromId, limit }: PlantPage): readonly PlantRecord[] {
    const s = this.sql;
    const key = tag === null ? `${fromId}:${limit}` : `${fromId}:${limit}:${tag}`;
    const cached = this.pages.get(owner, key);
    if (cached) return cached;
    const rows = (
      owner === null
        ? tag === null
          ? s.listAll.all(fromId, limit)
          : s.listTag.all(tag, fromId, limit)
        : tag === null
          ? s.listOwner.all(owner, fromId, limit)
          : s.listOwnerTag.all(owner, tag, fromId, limit)
    ) as PlantRow[];
    this.pages.set(owner, key, rows);
    return rows;
  }

  /**
   * A file is read on a connection of its own, in one read transaction (sqlite-snapshot.ts). An
   * in-memory database has no second connection, and no other process writes it: it is read whole,
   * in one synchronous statement, which nothing can interleave with.
   */
  snapshotPlants(pageSize: number): AsyncIterable<readonly PlantRecord[]> {
    if (!this.db.memory) return snapshotPages(this.db.name, pageSize);
    const rows = this.sql.listAll.all(FIRST_ID, -1) as PlantRow[]; // LIMIT -1: no limit
    return (async function* () {
      for (let at = 0; at < rows.length; at += pageSize) yield rows.slice(at, at + pageSize);
    })();
  }

  insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult> {
    return Promise.resolve(this.batch(plants));
  }

  // One IMMEDIATE transaction: a single fsync for the whole batch.
  private readonly batch = (plants: readonly PlantRecord[]): BatchResult => {
    const { insert, byId } = this.sql;
    let inserted = 0;
    let unchanged = 0;
    const conflicts: PlantRecord[] = [];
    this.db
      .transaction(() => {
        for (const plant of plants) {
          if (insert.run(plant.id, plant.owner, plant.name, plant.tag).changes === 1) {
            this.events.record('plant.created', plant.owner, plant.id, createdPayload(plant));
            inserted += 1;
          } else if (samePlant(byId.get(plant.id) as PlantRow, plant)) unchanged += 1;
          else conflicts.push(plant);
        }
      })
      .immediate();
    if (inserted > 0) this.pages.clear();
    return { inserted, unchanged, conflicts };
  };

  deletePlant(id: bigint, owner: string | null): Promise<boolean> {
    const { delete: remove, deleteOwn } = this.sql;
    return this.writes.run(() => {
      const deleted = (owner === null ? remove.get(id) : deleteOwn.get(id, owner)) as string | undefined;
      if (deleted === undefined) return false;
      this.events.record('plant.deleted', deleted, id, deletedPayload(id));
      this.pages.invalidate(owner); // null: an admin's delete, whose owner is not known here
      this.eventsWritten();
      return true;
    });
  }

  createToken(t: TokenRecord): Promise<void> {
    this.sql.tokenInsert.run(t.id, t.secretHash, t.subject, t.scopes.join(' '), t.createdAt, t.expiresAt, t.revokedAt);
    return Promise.resolve();
  }

  findToken(id: string): Promise<TokenRecord | undefined> {
    const row = unavailableWhenBusy(() => this.sql.tokenById.get(id) as TokenRow | undefined);
    return Promise.resolve(row && toToken(row));
  }

  listTokens(): Promise<TokenRecord[]> {
    return Promise.resolve((this.sql.tokenAll.all() as TokenRow[]).map(toToken));
  }

  revokeToken(id: string, at: number): Promise<boolean> {
    return Promise.resolve(this.sql.tokenRevoke.run(at, id).changes === 1);
  }

  // Events, webhooks and deliveries: reads answer from the connection at once; writes go through
  // the group commit, so none of them waits inside SQLite for another process's lock.

  readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<EventRecord[]> {
    return Promise.resolve(unavailableWhenBusy(() => this.events.readEvents(after, owner, limit, types)));
  }

  readEventRows(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<readonly EventRow[]> {
    return Promise.resolve(unavailableWhenBusy(() => this.events.readEventRows(after, owner, limit, types)));
  }

  eventHorizon(): Promise<bigint> {
    return Promise.resolve(unavailableWhenBusy(() => this.events.eventHorizon()));
  }

  lastEventId(): Promise<bigint> {
    return Promise.resolve(unavailableWhenBusy(() => this.events.lastEventId()));
  }

  pruneEvents(retentionMs: number, batch: number): Promise<number> {
    return this.writes.run(() => this.events.prune(retentionMs, batch));
  }

  /**
   * Calls `listener` when events may have committed: at once after this process's own commits,
   * and within `pollMs` after another connection's (PRAGMA data_version, checked only while
   * someone watches). Answers the function that stops watching.
   */
  watchEvents(listener: () => void, pollMs = 100): () => void {
    this.watchers.add(listener);
    this.watchTimer ??= untraced(() =>
      setInterval(() => {
        let version: unknown;
        try {
          version = this.sql.dataVersion.get();
        } catch {
          return; // a lock or a closed database: the next tick tries again
        }
        if (version === this.seenVersion) return;
        this.seenVersion = version;
        for (const watcher of this.watchers) watcher();
      }, pollMs).unref(),
    );
    return () => {
      this.watchers.delete(listener);
      if (this.watchers.size === 0 && this.watchTimer) {
        clearInterval(this.watchTimer);
        this.watchTimer = undefined;
      }
    };
  }

  createWebhook(webhook: NewWebhookRecord, max: number): Promise<boolean> {
    return this.writes.run(() => this.events.createWebhook(webhook, max));
  }

  listWebhooks(owner: string | null): Promise<WebhookRecord[]> {
    return Promise.resolve(unavailableWhenBusy(() => this.events.listWebhooks(owner)));
  }

  deleteWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.events.deleteWebhook(id, owner));
  }

  enableWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.events.enableWebhook(id, owner));
  }

  updateWebhook(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): Promise<{ webhook: WebhookRecord; disabled: boolean } | undefined> {
    return this.writes.run(() => this.webhooks.update(id, owner, patch));
  }

  rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): Promise<WebhookRecord | undefined> {
    return this.writes.run(() => this.webhooks.rotateSecret(id, owner, secret, previousUntil));
  }

  pingWebhook(id: string, owner: string | null): Promise<DeliveryRecord | undefined> {
    return this.writes.run(() => this.webhooks.ping(id, owner));
  }

  recoverDeliveries(id: string, owner: string | null, since: number): Promise<number | undefined> {
    return this.writes.run(() => this.webhooks.recover(id, owner, since));
  }

  listAttempts(webhookId: string, deliveryId: bigint, owner: string | null): Promise<AttemptRecord[] | undefined> {
    return Promise.resolve(unavailableWhenBusy(() => this.webhooks.attempts(webhookId, deliveryId, owner)));
  }

  listDeliveries(webhookId: string, owner: string | null, limit: number): Promise<DeliveryRecord[] | undefined> {
    // A write (the dispatcher's kind, not fsynced): the events still behind the cursor are fanned out first.
    return this.leases.run(() => this.events.listDeliveries(webhookId, owner, limit));
  }

  retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.events.retryDelivery(webhookId, deliveryId, owner));
  }

  claimDeliveries(
    holder: string,
    leaseMs: number,
    limit: number,
    perWebhook: number,
    busy: ReadonlyMap<string, number>,
    fanOut = FAN_OUT_BATCH,
  ): Promise<ClaimedDelivery[]> {
    return this.leases.run(() => this.events.claim(holder, leaseMs, limit, perWebhook, busy, fanOut));
  }

  recordAttempt(id: bigint, holder: string, outcome: AttemptOutcome): Promise<AttemptRecorded> {
    return this.leases.run(() => this.events.recordAttempt(id, holder, outcome));
  }

  releaseLeases(holder: string): Promise<void> {
    return this.leases.run(() => this.events.releaseLeases(holder));
  }

  nextDueInMs(): Promise<number | null> {
    return Promise.resolve(unavailableWhenBusy(() => this.events.nextDueInMs()));
  }

  private backlogStatements: ReturnType<typeof prepareBacklogStatements> | undefined;
  webhookBacklog(): Promise<WebhookBacklog> {
    return Promise.resolve(
      unavailableWhenBusy(() => {
        this.backlogStatements ??= prepareBacklogStatements(this.db);
        return readBacklog(this.backlogStatements, Date.now()); // SqliteEvents' clock
      }),
    );
  }

  durabilityWarnings(): Promise<string[]> {
    return Promise.resolve([]); // WAL and synchronous=FULL are set and checked when the file is opened
  }

  countPlants(): Promise<number> {
    return Promise.resolve(this.sql.count.get() as number);
  }

  isReady(): Promise<boolean> {
    try {
      this.db.prepare('SELECT 1').get();
      return Promise.resolve(true);
    } catch {
      return Promise.resolve(false);
    }
  }

  close(): Promise<void> {
    if (this.watchTimer) clearInterval(this.watchTimer);
    this.watchTimer = undefined;
    this.watchers.clear();
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}
