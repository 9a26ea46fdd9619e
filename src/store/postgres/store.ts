import pg from 'pg';
import { DISPATCH_POOL_SIZE, type PostgresOptions, createPool, migrate, routerFor } from './connection.js';
import type { HostRouter, Refusal } from './hosts.js';
import { hostLabel } from '../../wire/postgres-url.js';
import { readBacklog } from './backlog.js';
import { PostgresDeliveries } from './deliveries.js';
import { classifyPostgresError } from './errors.js';
import { PostgresEventLog } from './event-log.js';
import { PostgresPlants } from './plants.js';
import { EventPublication } from './publication.js';
import { snapshotPages } from './snapshot.js';
import { PostgresTokens } from './tokens.js';
import { PostgresEventWatch } from './watch.js';
import { PostgresWebhooks } from './webhooks.js';
import {
  type BatchResult,
  type CreateResult,
  type PlantPage,
  type PlantRecord,
  type Store,
  type TicketRecord,
  type TokenPage,
  type TokenRecord,
} from '../store.js';
import {
  type EventRecord,
  type EventRow,
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
  type NewWebhookRecord,
  type WebhookPatch,
  type ClaimedDelivery,
  type ClaimRequest,
  type DeliveryRecord,
  type Recovered,
  type RecoverOptions,
  type WebhookRecord,
  type WebhookBacklog,
} from '../webhook-store.js';

// The PostgreSQL adapter of the Store port: the pools, and the modules of plants, tokens, the event
// log, deliveries and webhooks that do the work on them.

/** How long closing waits for the servers' goodbyes before it cuts the connections left. */
const CLOSE_GRACE_MS = 1000;

export function openPostgres(url: string, options: PostgresOptions = {}): PostgresStore {
  // One router for every connection of the store: the pools' and the LISTEN one (interface 1.3.0).
  const router = routerFor(url, options);
  // The dispatcher's pool (see PostgresDeliveries) opens only when a dispatcher first claims.
  return new PostgresStore(
    createPool(url, options, router),
    () => createPool(url, { ...options, poolSize: DISPATCH_POOL_SIZE, asyncCommit: true }, router),
    router,
  );
}

export class PostgresStore implements Store {
  readonly engine = 'postgres' as const;
  private readonly plants: PostgresPlants;
  private readonly tokens: PostgresTokens;
  private readonly log: PostgresEventLog;
  private readonly deliveries: PostgresDeliveries;
  private readonly webhooks: PostgresWebhooks;
  private readonly watch: PostgresEventWatch;
  private readonly publication: EventPublication;

  private dispatchPool: pg.Pool | undefined;

  constructor(
    private readonly pool: pg.Pool,
    openDispatchPool?: () => pg.Pool,
    /** Where a multi-host URL's connections go (postgres/hosts.ts); undefined for one server. */
    readonly router?: HostRouter,
  ) {
    this.publication = new EventPublication(pool);
    this.plants = new PostgresPlants(pool, () => this.publication.written());
    this.tokens = new PostgresTokens(pool);
    this.log = new PostgresEventLog(pool);
    this.webhooks = new PostgresWebhooks(pool);
    this.deliveries = new PostgresDeliveries(
      pool,
      openDispatchPool === undefined ? undefined : () => (this.dispatchPool ??= openDispatchPool()),
    );
    const Client = router?.Client ?? pg.Client;
    const url = pool.options.connectionString ?? '';
    this.watch = new PostgresEventWatch(
      () => new Client({ connectionString: url, connectionTimeoutMillis: 3000 }),
      (through) => this.publication.heard(through),
    );
    router?.start();
  }

  migrate(): Promise<number[]> {
    return migrate(this.pool);
  }

  createPlant(plant: PlantRecord): Promise<CreateResult> {
    return this.plants.create(plant);
  }

  listPlants(page: PlantPage): Promise<PlantRecord[]> {
    return this.plants.list(page);
  }

  snapshotPlants(pageSize: number): AsyncGenerator<readonly PlantRecord[]> {
    return snapshotPages(this.pool, pageSize);
  }

  insertBatch(plants: readonly PlantRecord[]): Promise<BatchResult> {
    return this.plants.insertBatch(plants);
  }

  deletePlant(id: bigint, owner: string | null): Promise<boolean> {
    return this.plants.delete(id, owner);
  }

  createToken(token: TokenRecord): Promise<void> {
    return this.tokens.create(token);
  }

  findToken(id: string): Promise<TokenRecord | undefined> {
    return this.tokens.find(id);
  }

  listTokens(page: TokenPage): Promise<TokenRecord[]> {
    return this.tokens.list(page);
  }

  revokeToken(id: string, at: number): Promise<boolean> {
    return this.tokens.revoke(id, at);
  }

  createTicket(ticket: Omit<TicketRecord, 'expiresAt'>, now: number, lifetimeMs: number): Promise<number> {
    return this.tokens.createTicket(ticket, now, lifetimeMs);
  }

  spendTicket(hash: Buffer, now: number): Promise<TicketRecord | undefined> {
    return this.tokens.spendTicket(hash, now);
  }

  // Events, webhooks and deliveries.

  readEvents(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<EventRecord[]> {
    return this.publication.settled().then(() => this.log.readEvents(after, owner, limit, types));
  }

  readEventRows(
    after: bigint,
    owner: string | null,
    limit: number,
    types: readonly EventType[] | null = null,
  ): Promise<readonly EventRow[]> {
    return this.publication.settled().then(() => this.log.readEventRows(after, owner, limit, types));
  }

  eventHorizon(): Promise<bigint> {
    return this.log.eventHorizon();
  }

  lastEventId(): Promise<bigint> {
    return this.publication.settled().then(() => this.log.lastEventId());
  }

  eventsSettled(): Promise<void> {
    return this.publication.settled();
  }

  /** Only published events go: the horizon never passes an id that may still commit. */
  async pruneEvents(retentionMs: number, batch: number, after = PRUNE_START): Promise<PruneBatch> {
    await this.publication.settled();
    return this.log.prune(retentionMs, batch, after);
  }

  /**
   * LISTEN/NOTIFY on a connection of its own, opened while anyone watches: the event watermark's
   * moves, whichever instance's round moved it (postgres/publication.ts).
   */
  watchEvents(listener: (published: EventsPublished) => void): () => void {
    this.publication.start();
    return this.watch.watch(listener);
  }

  createWebhook(webhook: NewWebhookRecord, max: number): Promise<boolean> {
    return this.webhooks.create(webhook, max);
  }

  listWebhooks(owner: string | null): Promise<WebhookRecord[]> {
    return this.webhooks.list(owner);
  }

  deleteWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.webhooks.delete(id, owner);
  }

  enableWebhook(id: string, owner: string | null): Promise<boolean> {
    return this.webhooks.enable(id, owner);
  }

  updateWebhook(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): Promise<{ webhook: WebhookRecord; disabled: boolean } | undefined> {
    return this.webhooks.update(id, owner, patch);
  }

  rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): Promise<WebhookRecord | undefined> {
    return this.webhooks.rotateSecret(id, owner, secret, previousUntil);
  }

  pingWebhook(id: string, owner: string | null): Promise<DeliveryRecord | undefined> {
    return this.webhooks.ping(id, owner);
  }

  recoverDeliveries(
    id: string,
    owner: string | null,
    since: number,
    options: RecoverOptions = {},
  ): Promise<Recovered | undefined> {
    return this.webhooks.recover(id, owner, since, options);
  }

  listAttempts(webhookId: string, deliveryId: bigint, owner: string | null): Promise<AttemptRecord[] | undefined> {
    return this.webhooks.attempts(webhookId, deliveryId, owner);
  }

  listDeliveries(
    webhookId: string,
    owner: string | null,
    limit: number,
    before?: bigint,
  ): Promise<DeliveryRecord[] | undefined> {
    if (before !== undefined) return this.deliveries.listBefore(webhookId, owner, limit, before);
    return this.deliveries.listDeliveries(webhookId, owner, limit);
  }

  countAttempts(webhookId: string, owner: string | null, span: AttemptSpan): Promise<AttemptCounts[] | undefined> {
    return this.webhooks.countAttempts(webhookId, owner, span);
  }

  retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean> {
    return this.deliveries.retryDelivery(webhookId, deliveryId, owner);
  }

  claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]> {
    return this.deliveries.claim(request);
  }

  recordAttempt(id: bigint, holder: string, outcome: AttemptOutcome): Promise<AttemptRecorded> {
    return this.deliveries.recordAttempt(id, holder, outcome);
  }

  releaseLeases(holder: string): Promise<void> {
    return this.deliveries.releaseLeases(holder);
  }

  nextDueInMs(): Promise<number | null> {
    return this.deliveries.nextDueInMs();
  }

  webhookBacklog(): Promise<WebhookBacklog> {
    return readBacklog(this.pool);
  }

  async durabilityWarnings(): Promise<string[]> {
    const warnings: string[] = [];
    const setting = async (name: 'fsync' | 'synchronous_commit'): Promise<string> => {
      try {
        return (await this.pool.query<Record<string, string>>(`SHOW ${name}`)).rows[0]?.[name] ?? '';
      } catch (error) {
        throw classifyPostgresError(error);
      }
    };
    if ((await setting('fsync')) === 'off')
      warnings.push('PostgreSQL runs with fsync=off: a crash can lose committed plants');
    if ((await setting('synchronous_commit')) === 'off') {
      warnings.push('PostgreSQL runs with synchronous_commit=off: a crash can lose plants already answered 200');
    }
    return warnings;
  }

  countPlants(): Promise<number> {
    return this.plants.count();
  }

  databaseRoute(): { host: string | undefined; waiting: number; refused: ReadonlyMap<string, Refusal> } | undefined {
    const router = this.router;
    if (router === undefined) return undefined;
    const host = router.host;
    // A request waits on a new connection looking for the primary, or queued behind a full pool meanwhile.
    const waiting = router.waiting + (router.waiting > 0 ? this.pool.waitingCount : 0);
    return { host: host && hostLabel(host), waiting, refused: router.refused };
  }

  async isReady(): Promise<boolean> {
    try {
      // With more than one server, ready means a server that is what the URL asks is in use now:
      // false at once while none is (a failover), not after DATABASE_FAILOVER_WAIT.
      if (this.router !== undefined) return await this.router.ready(this.pool);
      await this.pool.query('SELECT 1');
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Ends every connection. A goodbye to a server that does not answer is never answered, and its
   * half-closed socket would keep the process alive: past CLOSE_GRACE_MS what is left is cut.
   */
  async close(): Promise<void> {
    this.publication.close();
    const ended = (async () => {
      await this.watch.close();
      if (!this.pool.ended) await this.pool.end();
      if (this.dispatchPool !== undefined && !this.dispatchPool.ended) await this.dispatchPool.end();
    })();
    ended.catch(() => {});
    const within = async (ms: number): Promise<void> => {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([ended, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
      clearTimeout(timer);
    };
    await within(CLOSE_GRACE_MS);
    this.router?.close();
    // What was cut ends at once; a pool still waiting for a connection it lent out is not waited for.
    await within(CLOSE_GRACE_MS);
  }
}
