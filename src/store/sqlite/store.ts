import type Database from 'better-sqlite3';
import { TurnBatch } from '../batcher.js';
import { GroupCommit, isBusy } from './group-commit.js';
import { prepareBacklogStatements, readBacklog } from './backlog.js';
import { type SqliteOptions, type SqliteTracing, migrate, openConnection } from './connection.js';
import { SqliteDeliveries, prepareDeliveryStatements } from './deliveries.js';
import { SqliteEventLog, prepareLogStatements } from './event-log.js';
import { SqlitePlants, preparePlantStatements } from './plants.js';
import { SqliteTokens, prepareTokenStatements } from './tokens.js';
import { SqliteEventWatch } from './watch.js';
import { SqliteWebhooks, prepareWebhookStatements } from './webhooks.js';
import { type RecoverSteps, recoverInParts } from '../recover.js';
import {
  type BatchResult,
  type CreateResult,
  type PlantPage,
  type PlantRecord,
  type Store,
  StoreUnavailableError,
  type TicketRecord,
  type TokenPage,
  type TokenRecord,
} from '../store.js';
import {
  type EventRecord,
  type EventRow,
  ANY_PUBLISHED,
  type EventsPublished,
  type EventType,
  type PruneBatch,
  PRUNE_START,
} from '../event-store.js';
import {
  type AttemptCounts,
  type AttemptOutcome,
  type AttemptRecord,
  type AttemptSpan,
  type AttemptRecorded,
  type ClaimedDelivery,
  type ClaimRequest,
  type NewWebhookRecord,
  type WebhookPatch,
  type DeliveryRecord,
  type WebhookRecord,
  type WebhookBacklog,
  type Recovered,
  type RecoverOptions,
} from '../webhook-store.js';

/**
 * The rows a part of a recover examines. A part holds the one connection and the event loop, so it
 * stays a few milliseconds long and other writes and requests go between parts; fewer rows would
 * pay more in commits (docs/decisions.md, "Recover in parts").
 */
const RECOVER_PART_ROWS = 2000;

/**
 * A plant's create or delete keeps nothing outside the database but its cache of pages and a
 * wake-up of the event watchers: run again after a rollback, it does the same. It needs no
 * savepoint of its own in a group commit (GroupCommit.run).
 */
const RERUNNABLE = { rerunnable: true };

// The SQLite adapter of the Store port: each call meets the one connection in the way its kind
// needs (a write in the group commit, a dispatcher's write in the commit that is not fsynced each
// time, a read at once that answers 503 on a lock), and the work itself is done by the modules of
// plants, tokens, the event log, deliveries and webhooks.

/** Opens (creating when missing) a SQLite store with the durability a 200 promises (docs/api.md). */
export function openSqlite(path: string, options: SqliteOptions = {}): SqliteStore {
  const { locks = 'block', lockWaitMs, tracing } = options;
  const db = openConnection(path, { locks, tracing });
  return new SqliteStore(db, locks === 'event-loop' ? { lockWaitMs: lockWaitMs ?? 3000 } : undefined, tracing);
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

  private readonly writes: GroupCommit;
  /** The reads of one turn: one check of data_version for all of them, then one lookup each. */
  private readonly reads = new TurnBatch<PlantPage, readonly PlantRecord[]>((pages) =>
    unavailableWhenBusy(() => this.plants.readPages(pages)),
  );
  private readonly watch: SqliteEventWatch;

  /** `nonBlocking`: the server's connection, whose statements never wait inside SQLite for a lock. */
  constructor(
    private readonly db: Database.Database,
    private readonly nonBlocking?: { readonly lockWaitMs: number },
    tracing?: SqliteTracing,
  ) {
    this.writes = new GroupCommit(db, nonBlocking);
    this.leases = new GroupCommit(db, { ...nonBlocking, durable: false });
    this.watch = new SqliteEventWatch(db, tracing);
  }

  /**
   * The dispatcher's own writes (leases, attempts' records): a crash may lose the last of them
   * without harm, as a lost lease runs out and a lost record means the delivery is sent again
   * (at least once), so they are not fsynced each; the next durable commit syncs them too.
   */
  private readonly leases: GroupCommit;

  // Each part's statements are prepared when first used: after migrations created the tables.

  private plantStore: SqlitePlants | undefined;
  private get plants(): SqlitePlants {
    this.plantStore ??= new SqlitePlants(this.db, preparePlantStatements(this.db), this.log, () =>
      this.watch.eventsWritten(),
    );
    return this.plantStore;
  }

  private tokenStore: SqliteTokens | undefined;
  private get tokens(): SqliteTokens {
    this.tokenStore ??= new SqliteTokens(prepareTokenStatements(this.db));
    return this.tokenStore;
  }

  private logStore: SqliteEventLog | undefined;
  private get log(): SqliteEventLog {
    this.logStore ??= new SqliteEventLog(prepareLogStatements(this.db));
    return this.logStore;
  }

  private deliveryStore: SqliteDeliveries | undefined;
  private get deliveries(): SqliteDeliveries {
    this.deliveryStore ??= new SqliteDeliveries(prepareDeliveryStatements(this.db), this.log);
    return this.deliveryStore;
  }

  private webhookStore: SqliteWebhooks | undefined;
  private get webhooks(): SqliteWebhooks {
    this.webhookStore ??= new SqliteWebhooks(prepareWebhookStatements(this.db), this.deliveries);
    return this.webhookStore;
  }

  migrate(): Promise<number[]> {
    return Promise.resolve(migrate(this.db, this.nonBlocking !== undefined));
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    return this.writes.run(() => this.plants.create(plant), RERUNNABLE);
  }

  listPlants(page: PlantPage): Promise<readonly PlantRecord[]> {
    return this.reads.submit(page);
  }

  snapshotPlants(pageSize: number): AsyncIterable<readonly PlantRecord[]> {
    return this.plants.snapshot(pageSize);
  }

  insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult> {
    return Promise.resolve(this.plants.insertBatch(plants));
  }

  importing<T>(run: () => Promise<T>): Promise<T> {
    return this.plants.importing(run);
  }

  deletePlant(id: bigint, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.plants.delete(id, owner), RERUNNABLE);
  }

  createToken(token: TokenRecord): Promise<void> {
    this.tokens.create(token);
    return Promise.resolve();
  }

  findToken(id: string): Promise<TokenRecord | undefined> {
    return Promise.resolve(unavailableWhenBusy(() => this.tokens.find(id)));
  }

  listTokens(page: TokenPage): Promise<TokenRecord[]> {
    return Promise.resolve(this.tokens.list(page));
  }

  revokeToken(id: string, at: number): Promise<boolean> {
    return Promise.resolve(this.tokens.revoke(id, at));
  }

  createTicket(ticket: Omit<TicketRecord, 'expiresAt'>, now: number, lifetimeMs: number): Promise<number> {
    return this.writes.run(() => this.tokens.createTicket(ticket, now, lifetimeMs));
  }

  spendTicket(hash: Buffer, now: number): Promise<TicketRecord | undefined> {
    return this.writes.run(() => this.tokens.spendTicket(hash, now));
  }

  // Events, webhooks and deliveries: reads answer from the connection at once; writes go through
  // the group commit, so none of them waits inside SQLite for another process's lock.

  readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<EventRecord[]> {
    return Promise.resolve(unavailableWhenBusy(() => this.log.readEvents(after, owner, limit, types)));
  }

  readEventRows(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<readonly EventRow[]> {
    return Promise.resolve(unavailableWhenBusy(() => this.log.readEventRows(after, owner, limit, types)));
  }

  eventHorizon(): Promise<bigint> {
    return Promise.resolve(unavailableWhenBusy(() => this.log.eventHorizon()));
  }

  lastEventId(): Promise<bigint> {
    return Promise.resolve(unavailableWhenBusy(() => this.log.lastEventId()));
  }

  /** Events commit one writer at a time, in id order: each is published by its commit. */
  eventsSettled(): Promise<void> {
    return Promise.resolve();
  }

  pruneEvents(retentionMs: number, batch: number, after = PRUNE_START): Promise<PruneBatch> {
    return this.writes.run(() => this.log.prune(retentionMs, batch, after));
  }

  /** Calls `listener` when events may have committed (sqlite/watch.ts); answers the function that stops watching. */
  watchEvents(listener: (published: EventsPublished) => void, pollMs = 100): () => void {
    return this.watch.watch(() => listener(ANY_PUBLISHED), pollMs);
  }

  createWebhook(webhook: NewWebhookRecord, max: number): Promise<boolean> {
    return this.writes.run(() => this.webhooks.create(webhook, max));
  }

  listWebhooks(owner: string | null): Promise<WebhookRecord[]> {
    return Promise.resolve(unavailableWhenBusy(() => this.webhooks.list(owner)));
  }

  deleteWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.webhooks.delete(id, owner));
  }

  enableWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.webhooks.enable(id, owner));
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

  /**
   * Each part a write of its own, committed with whatever else arrived in its turn: the connection
   * and the event loop are held one part at a time (a few milliseconds), never for the whole.
   */
  recoverDeliveries(
    id: string,
    owner: string | null,
    since: number,
    options: RecoverOptions = {},
  ): Promise<Recovered | undefined> {
    const steps: RecoverSteps = {
      start: () => this.writes.run(() => this.webhooks.recoverStart(id, owner, since)),
      requeue: (target, after, rows) =>
        this.writes.run(() => this.webhooks.requeuePart(id, since, target, after, rows)),
      missed: (target, after, watermark, rows, choose) =>
        this.writes.run(() => this.webhooks.missedPart(id, target, after, watermark, rows, choose)),
    };
    return recoverInParts(steps, options, RECOVER_PART_ROWS);
  }

  listAttempts(webhookId: string, deliveryId: bigint, owner: string | null): Promise<AttemptRecord[] | undefined> {
    return Promise.resolve(unavailableWhenBusy(() => this.webhooks.attempts(webhookId, deliveryId, owner)));
  }

  listDeliveries(
    webhookId: string,
    owner: string | null,
    limit: number,
    before?: bigint,
  ): Promise<DeliveryRecord[] | undefined> {
    if (before !== undefined) {
      return Promise.resolve(unavailableWhenBusy(() => this.deliveries.listBefore(webhookId, owner, limit, before)));
    }
    // A write (the dispatcher's kind, not fsynced): the events still behind the cursor are fanned out first.
    return this.leases.run(() => this.deliveries.listDeliveries(webhookId, owner, limit));
  }

  countAttempts(webhookId: string, owner: string | null, span: AttemptSpan): Promise<AttemptCounts[] | undefined> {
    return Promise.resolve(unavailableWhenBusy(() => this.webhooks.countAttempts(webhookId, owner, span)));
  }

  retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean> {
    return this.writes.run(() => this.deliveries.retryDelivery(webhookId, deliveryId, owner));
  }

  claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]> {
    return this.leases.run(() => this.deliveries.claim(request));
  }

  recordAttempt(id: bigint, holder: string, outcome: AttemptOutcome): Promise<AttemptRecorded> {
    return this.leases.run(() => this.deliveries.recordAttempt(id, holder, outcome));
  }

  releaseLeases(holder: string): Promise<void> {
    return this.leases.run(() => this.deliveries.releaseLeases(holder));
  }

  nextDueInMs(): Promise<number | null> {
    return Promise.resolve(unavailableWhenBusy(() => this.deliveries.nextDueInMs()));
  }

  private backlogStatements: ReturnType<typeof prepareBacklogStatements> | undefined;
  webhookBacklog(): Promise<WebhookBacklog> {
    return Promise.resolve(
      unavailableWhenBusy(() => {
        this.backlogStatements ??= prepareBacklogStatements(this.db);
        return readBacklog(this.backlogStatements, Date.now()); // the event side's clock
      }),
    );
  }

  durabilityWarnings(): Promise<string[]> {
    return Promise.resolve([]); // WAL and synchronous=FULL are set and checked when the file is opened
  }

  countPlants(): Promise<number> {
    return Promise.resolve(this.plants.count());
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
    this.watch.close();
    if (this.db.open) this.db.close();
    return Promise.resolve();
  }
}
