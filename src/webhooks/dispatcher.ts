import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import type { EventSettings } from '../config.js';
import { failureFields, type Store } from '../store/store.js';
import { FAN_OUT_BATCH } from '../store/event-store.js';
import { type AttemptOutcome, type AttemptRecorded, type ClaimedDelivery, PING_TYPE } from '../store/webhook-store.js';
import type { ApiPressure } from './api-pressure.js';
import { type AttemptResultKind, attemptResultKind } from './attempt-result.js';
import { logDisabled } from './disabled-log.js';
import { ReceiverKnowledge } from './receiver-knowledge.js';
import { outcomeOf } from './outcome.js';
import type { SecretBox } from './secret-box.js';
import type { WebhookAttempt, WebhookSender } from './sender.js';
import { signDelivery } from './signing.js';
import { tracing, untraced } from '../tracing-hooks.js';

/** How many deliveries one claim leases at most. */
const CLAIM_BATCH = 64;
/** The longest sleep between two looks for due deliveries, whatever woke or did not wake it. */
const MAX_IDLE_MS = 1000;
const USER_AGENT = 'plant-store-webhooks/1.2.0';
/** The deliveries in flight in one process while the API saturates it (see ApiPressure). */
const UNDER_PRESSURE_IN_FLIGHT = 8;
/**
 * While the API saturates the process, a look (its fan-out and claim, two statements) at most this
 * often, however many sends end or events commit meanwhile: at most 20 looks and 160 deliveries a
 * second, so the burst keeps the database's time (BENCHMARKS.md).
 */
const UNDER_PRESSURE_LOOK_MS = 50;

// Kept where the tests and callers of 1.1.0 found it.
export { outcomeOf } from './outcome.js';

/**
 * Sends due deliveries, in every `serve` process of every instance. Deliveries are leased in the
 * store (on PostgreSQL with FOR UPDATE SKIP LOCKED), so each is in flight in one process at a time;
 * a process that dies leaves its leases to expire (`leaseMs`) for another. No transaction is open
 * while a request is out: the lease is one statement, the attempt's record another.
 *
 * It wakes when events commit (the store's watchEvents: this process's commits, LISTEN/NOTIFY or
 * PRAGMA data_version for the others) and when the next retry is due, and looks at least every
 * second. At most `maxInFlight` requests are out, `maxInFlightPerWebhook` to one webhook and
 * `maxInFlightPerSubject` to one subject's webhooks together, and each claim starts at the webhook
 * after the last one's (round robin), so a slow receiver, or a subject's many, holds only its own
 * share; the webhooks whose receivers struggle, and those whose receivers are not yet heard, hold a
 * quarter each, one delivery apiece (ReceiverKnowledge); while HTTP requests saturate the process (`pressure`),
 * only UNDER_PRESSURE_IN_FLIGHT, with a look at most every UNDER_PRESSURE_LOOK_MS, so the API keeps
 * its speed and the deliveries catch up after.
 */
export class Dispatcher {
  readonly holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly inFlight = new Map<string, number>();
  /** In flight by subject (the webhooks' owner): a subject holds at most maxInFlightPerSubject. */
  private readonly inFlightBySubject = new Map<string, number>();
  /** The webhook the last claim ended with: the next starts after it (round robin). */
  private lastClaimedWebhook: string | undefined;
  /** Which receivers are known to answer, to struggle, or not yet (the claims' shares). */
  private readonly receivers: ReceiverKnowledge;
  private readonly sending = new Set<Promise<void>>();
  private running = false;
  private looking = false;
  private again = false;
  private soon = false;
  /** A look is put off until a timer (under pressure). */
  private deferred = false;
  private lastLookAt = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private unwatch: (() => void) | undefined;

  constructor(
    private readonly store: Store,
    /** Sends one attempt: a WebhookSender, or a TargetSender for URLs and destinations. */
    private readonly sender: Pick<WebhookSender, 'send'>,
    private readonly box: SecretBox,
    private readonly settings: EventSettings,
    private readonly log: FastifyBaseLogger,
    private readonly pressure?: ApiPressure,
    private readonly clock: () => number = Date.now,
    /** Told of every attempt once, as it ends (the metrics: docs/monitoring.md). */
    private readonly observe?: (result: AttemptResultKind, seconds: number) => void,
  ) {
    this.receivers = new ReceiverKnowledge(settings.maxInFlightPerWebhook);
  }

  /** How many requests may be out now. */
  private get capacity(): number {
    return this.pressure?.saturated === true
      ? Math.min(UNDER_PRESSURE_IN_FLIGHT, this.settings.maxInFlight)
      : this.settings.maxInFlight;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    // Events published while no webhook is active are owed nothing: no look for them.
    this.unwatch = this.store.watchEvents(({ webhooksActive }) => webhooksActive && this.wake());
    this.wake();
  }

  /**
   * Looks for due deliveries now (coalesced: one look at a time, and one more if woken meanwhile);
   * under pressure, no sooner than UNDER_PRESSURE_LOOK_MS after the last look began.
   */
  wake(): void {
    if (!this.running) return;
    if (this.looking) {
      this.again = true;
      return;
    }
    if (this.deferred) return;
    // At most UNDER_PRESSURE_LOOK_MS, should the clock step back.
    const wait = Math.min(this.lastLookAt + UNDER_PRESSURE_LOOK_MS - this.clock(), UNDER_PRESSURE_LOOK_MS);
    if (wait > 0 && this.pressure?.saturated === true) {
      this.deferred = true;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.deferred = false;
        this.wake();
      }, wait);
      this.timer.unref();
      return;
    }
    this.looking = true;
    this.lastLookAt = this.clock();
    clearTimeout(this.timer);
    void untraced(() => this.look()).finally(() => {
      this.looking = false;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /**
   * A wake at the end of this turn: the sends that finish in one turn free their slots together,
   * and one lease fills them all, instead of one lease (a write) per finished send.
   */
  private wakeSoon(): void {
    if (this.soon) return;
    this.soon = true;
    setImmediate(() => {
      this.soon = false;
      this.wake();
    });
  }

  private get total(): number {
    return this.sending.size;
  }

  private async look(): Promise<void> {
    let sleepMs = MAX_IDLE_MS;
    try {
      const saturated = this.pressure?.saturated === true;
      const capacity = this.capacity;
      while (this.running && this.total < capacity) {
        const room = Math.min(CLAIM_BATCH, capacity - this.total);
        const rooms = this.receivers.forClaim(capacity, this.inFlight);
        const claimed = await this.store.claimDeliveries({
          holder: this.holder,
          leaseMs: this.settings.leaseMs,
          limit: room,
          perWebhook: this.settings.maxInFlightPerWebhook,
          busy: rooms.busy,
          // Under pressure only as many events are fanned out as can be sent: a burst of creates
          // is not slowed by its webhooks, and the rest is fanned out once it ends.
          fanOut: saturated ? room : FAN_OUT_BATCH,
          subjects: {
            perSubject: this.settings.maxInFlightPerSubject,
            busy: this.inFlightBySubject,
            after: this.lastClaimedWebhook,
            newcomers: rooms.newcomers,
          },
        });
        this.lastClaimedWebhook = claimed.at(-1)?.webhook.id ?? this.lastClaimedWebhook;
        this.receivers.claimed(claimed, rooms);
        for (const delivery of claimed) this.send(delivery);
        if (claimed.length < room) break;
      }
      // While a send is out, its end wakes a look (wakeSoon); the next due time matters only once
      // none is, and reading it on every look would cost a query per look.
      if (this.total === 0) {
        const due = await this.store.nextDueInMs();
        if (due !== null) sleepMs = Math.min(sleepMs, Math.max(due, 5));
      }
    } catch (error) {
      this.log.warn(failureFields(error), 'webhook dispatcher: could not read due deliveries; trying again');
    }
    if (this.running) {
      this.timer = setTimeout(() => this.wake(), sleepMs);
      this.timer.unref();
    }
  }

  private send(delivery: ClaimedDelivery): void {
    const { id: webhookId, owner } = delivery.webhook;
    count(this.inFlight, webhookId, 1);
    count(this.inFlightBySubject, owner, 1);
    const done = this.attempt(delivery).finally(() => {
      count(this.inFlight, webhookId, -1);
      count(this.inFlightBySubject, owner, -1);
      this.sending.delete(done);
      this.wakeSoon(); // a slot is free: more may be due
    });
    this.sending.add(done);
  }

  private async attempt(delivery: ClaimedDelivery): Promise<void> {
    const attempt = delivery.attempts + 1;
    let result: WebhookAttempt;
    if (delivery.payload === '') {
      result = { durationMs: 0, error: 'the event is past its retention (EVENT_RETENTION) and cannot be sent' };
    } else {
      let secrets: string[] | undefined;
      try {
        secrets = this.secretsOf(delivery);
      } catch (error) {
        result = { durationMs: 0, error: (error as Error).message };
      }
      if (secrets !== undefined) {
        const signed = signDelivery(secrets, messageIdOf(delivery), this.clock() / 1000, delivery.payload);
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          'plant-store-event': delivery.type,
          ...signed,
        };
        const send = (): Promise<WebhookAttempt> =>
          this.sender.send({
            url: delivery.webhook.url,
            body: delivery.payload,
            headers,
            subject: delivery.webhook.owner,
          });
        // With tracing on, the attempt is a span and the request carries its `traceparent` (docs/tracing.md).
        const traced = tracing.current;
        result = await (traced === undefined
          ? send()
          : traced.deliver(
              {
                webhookId: delivery.webhook.id,
                deliveryId: String(delivery.id),
                eventType: delivery.type,
                attempt,
                url: delivery.webhook.url,
              },
              headers,
              send,
            ));
      }
    }
    this.observe?.(attemptResultKind(result!), result!.durationMs / 1000);
    this.receivers.learn(delivery.webhook, result!);
    // The schedule counts from its last start (a recover); a ping is attempted once.
    const outcome = outcomeOf(attempt - delivery.scheduleFrom, result!, this.settings, Math.random, {
      now: this.clock(),
      retries: delivery.type !== PING_TYPE,
    });
    try {
      const recorded = await this.record(delivery, outcome);
      if (!recorded)
        this.log.warn(
          { delivery: String(delivery.id) },
          'webhook dispatcher: lease lost before the attempt was recorded',
        );
      if (recorded === 'disabled') logDisabled(this.log, delivery.webhook, outcome.disable ?? 'failing');
      if (!outcome.healthy && outcome.status === 'failed') {
        this.log.info(
          {
            webhook: delivery.webhook.id,
            delivery: String(delivery.id),
            status: outcome.status,
            reason: outcome.lastError,
          },
          'webhook delivery failed for good',
        );
      }
    } catch (error) {
      // The lease runs out and another attempt follows: at least once, never lost.
      this.log.warn(
        { ...failureFields(error), delivery: String(delivery.id) },
        'webhook dispatcher: could not record an attempt',
      );
    }
  }

  /**
   * Records the attempt's outcome. Should that fail, it is recorded again without the attempt's
   * details (the receiver's answer, the error's words): whatever a receiver answered, the outcome
   * counts (docs/api.md#delivery), and a delivery is never left to be sent again and again because its
   * answer could not be stored. Throws when that fails too (the database is away): the lease then
   * runs out and the delivery is sent again, at least once and never lost.
   */
  private async record(delivery: ClaimedDelivery, outcome: AttemptOutcome): Promise<AttemptRecorded> {
    try {
      return await this.store.recordAttempt(delivery.id, this.holder, outcome);
    } catch (error) {
      const recorded = await this.store.recordAttempt(delivery.id, this.holder, withoutDetails(outcome));
      this.log.warn(
        { ...failureFields(error), delivery: String(delivery.id) },
        "webhook dispatcher: an attempt's details could not be recorded; its outcome is, without them",
      );
      return recorded;
    }
  }

  /**
   * The secrets to sign with: the current one, and during a rotation's overlap the previous one
   * after it (by this process's clock, which set the overlap's end: webhook.service.ts).
   */
  private secretsOf(delivery: ClaimedDelivery): string[] {
    const { id, secret, previousSecret, previousSecretUntil } = delivery.webhook;
    const secrets = [this.box.open(secret, id)];
    if (previousSecret !== null && previousSecretUntil !== null && this.clock() < previousSecretUntil) {
      secrets.push(this.box.open(previousSecret, id));
    }
    return secrets;
  }

  /**
   * Stops claiming, lets the requests that are out finish (each bounded by the delivery timeout)
   * and records them, then gives back any lease left: nothing claimed is lost.
   */
  async drain(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.deferred = false;
    this.unwatch?.();
    this.unwatch = undefined;
    while (this.sending.size > 0) await Promise.allSettled([...this.sending]);
    await this.store.releaseLeases(this.holder).catch(() => {});
  }
}

/** Adds `by` to `key`'s count, forgetting a key whose count reaches 0. */
function count(counts: Map<string, number>, key: string, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n <= 0) counts.delete(key);
  else counts.set(key, n);
}

/** An outcome without what the receiver or the network said: what any store can record. */
function withoutDetails(outcome: AttemptOutcome): AttemptOutcome {
  const lost = "this attempt's details could not be recorded";
  const lastError =
    outcome.lastError === null
      ? null
      : outcome.lastStatus === null
        ? lost
        : `the receiver answered ${outcome.lastStatus}; ${lost}`;
  return { ...outcome, lastError, response: null };
}

/**
 * The webhook-id header: `evt_<event id>` (the same on every retry, a recover's too), or for a
 * ping `ping_<delivery id>` (each ping its own message).
 */
const messageIdOf = (delivery: ClaimedDelivery): string =>
  delivery.eventId === null ? `ping_${delivery.id}` : `evt_${delivery.eventId}`;
